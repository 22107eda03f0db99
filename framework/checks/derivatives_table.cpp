#include "framework/checks/derivatives_table.hpp"

#include <algorithm>
#include <stdexcept>

namespace headgrad::checks {

const char* const kGeneratedTableStart = "<!-- This table is generated";
const char* const kGeneratedTableComment =
    "<!-- This table is generated from the rows each op family registers beside its checks "
    "(framework/checks/derivatives_table.hpp): edit a row there, then run "
    "build/headgrad_derivatives framework/ops/DERIVATIVES.md -->";

namespace {

bool is_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::string trimmed(const std::string& s) {
  const auto begin = s.find_first_not_of(' '), end = s.find_last_not_of(' ');
  return begin == std::string::npos ? "" : s.substr(begin, end - begin + 1);
}

// The logical rows of a family's markdown: its lines, each continuation (a line that starts with a
// space) joined to the row above it by one space.
std::vector<std::string> joined_rows(const std::string& family, const std::string& text) {
  std::vector<std::string> rows;
  std::size_t begin = 0;
  while (begin < text.size()) {
    auto end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (trimmed(line).empty()) continue;
    if (line[0] != ' ') rows.push_back(line);
    else if (rows.empty())
      throw std::invalid_argument("DERIVATIVES rows of " + family + ": a continuation line starts them: " + line);
    else rows.back() += " " + trimmed(line);
  }
  return rows;
}

} // namespace

std::vector<DerivativeRow> parse_derivatives(const std::string& family, const char* markdown) {
  std::vector<DerivativeRow> rows;
  for (const std::string& text : joined_rows(family, markdown ? markdown : "")) {
    std::vector<std::string> cells;
    std::size_t begin = 0;
    for (auto bar = text.find(" | "); bar != std::string::npos; bar = text.find(" | ", begin)) {
      cells.push_back(trimmed(text.substr(begin, bar - begin)));
      begin = bar + 3;
    }
    cells.push_back(trimmed(text.substr(begin)));
    const bool numbered = !cells[0].empty() && cells[0].find_first_not_of("0123456789") == std::string::npos;
    if (cells.size() != 6 || !numbered)
      throw std::invalid_argument("DERIVATIVES rows of " + family + ": \"" + text +
                                  "\" is not a place and five cells (op | forward | backward | saves | file · function)");
    rows.push_back({family, std::stoi(cells[0]), cells[1], cells[2], cells[3], cells[4], cells[5]});
  }
  return rows;
}

std::vector<DerivativeRow> derivative_rows() {
  std::vector<DerivativeRow> rows;
  for (const auto& family : check_families()) {
    std::vector<DerivativeRow> more = parse_derivatives(family.name, family.derivatives);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  std::stable_sort(rows.begin(), rows.end(), [](const DerivativeRow& a, const DerivativeRow& b) { return a.place < b.place; });
  for (std::size_t i = 1; i < rows.size(); ++i)
    if (rows[i].place == rows[i - 1].place)
      throw std::logic_error("DERIVATIVES rows: " + rows[i - 1].op + " (" + rows[i - 1].family + ") and " + rows[i].op +
                             " (" + rows[i].family + ") both take place " + std::to_string(rows[i].place));
  return rows;
}

std::vector<std::string> ops_named_by(const DerivativeRow& row) {
  std::vector<std::string> names;
  std::string piece;
  int depth = 0;
  auto take = [&] {
    const std::string name = trimmed(piece);
    if (!is_name(name))
      throw std::invalid_argument("DERIVATIVES row \"" + row.op + "\": \"" + name +
                                  "\" is not an op name (names are separated by \", \" or \" / \", notes go in "
                                  "parentheses after them)");
    names.push_back(name);
    piece.clear();
  };
  for (char c : row.op) {
    if (c == '(') ++depth;
    else if (c == ')') --depth;
    else if (depth == 0 && (c == ',' || c == '/')) take();
    else if (depth == 0) piece += c;
  }
  take();
  return names;
}

std::vector<std::string> ops_covered_by(const DerivativeRow& row) {
  std::vector<std::string> names = ops_named_by(row);
  // the functions after each "· ": `name`, `name`, ...
  const std::string dot = "· `";
  for (auto at = row.where.find(dot); at != std::string::npos; at = row.where.find(dot, at)) {
    at += dot.size();
    while (true) {
      const auto close = row.where.find('`', at);
      if (close == std::string::npos) break;
      names.push_back(row.where.substr(at, close - at));
      if (row.where.compare(close + 1, 3, ", `") != 0) break;
      at = close + 4;
    }
  }
  return names;
}

std::string derivatives_table(const std::vector<DerivativeRow>& rows) {
  std::string out = std::string(kGeneratedTableComment) + "\n";
  out += "| op | forward | backward (VJP) | saves | file · function |\n";
  out += "|---|---|---|---|---|\n";
  for (const auto& r : rows)
    out += "| " + r.op + " | " + r.forward + " | " + r.backward + " | " + r.saves + " | " + r.where + " |\n";
  return out;
}

std::string with_table(const std::string& doc, const std::string& table) {
  // the comment line, then the table's lines (each starts with '|')
  const std::string start = kGeneratedTableStart;
  std::size_t begin = 0;
  while (begin < doc.size() && doc.compare(begin, start.size(), start) != 0) {
    const auto next = doc.find('\n', begin);
    begin = next == std::string::npos ? doc.size() : next + 1;
  }
  if (begin >= doc.size()) throw std::invalid_argument("DERIVATIVES.md: no line starts with " + start);
  std::size_t end = doc.find('\n', begin);
  end = end == std::string::npos ? doc.size() : end + 1;
  while (end < doc.size() && doc[end] == '|') {
    const auto next = doc.find('\n', end);
    end = next == std::string::npos ? doc.size() : next + 1;
  }
  return doc.substr(0, begin) + table + doc.substr(end);
}

} // namespace headgrad::checks
