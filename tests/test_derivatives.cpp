// framework/ops/DERIVATIVES.md's table of derivatives is generated from the rows each op family
// registers beside its checks (framework/checks/registry.hpp, CheckFamily::derivatives;
// framework/checks/derivatives_table.hpp). These tests fail while the committed file differs from
// what the registrations generate, and while an op the public op headers declare has no row and is
// not listed as a composite or as having no gradient. They name no op: a new op's row goes beside
// its other checks, and nowhere else.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "framework/checks/derivatives_table.hpp"
#include "framework/checks/registry.hpp"
#include "tests/declared_ops.hpp"

using namespace headgrad;
using namespace headgrad::checks;

namespace {

const char* kRegenerate = "cmake --build build --target headgrad_derivatives && "
                          "build/headgrad_derivatives framework/ops/DERIVATIVES.md";

// The first line where a and b differ, both versions.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int n = 1;; ++n) {
    const bool more_a = static_cast<bool>(std::getline(sa, la)), more_b = static_cast<bool>(std::getline(sb, lb));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || la != lb)
      return "line " + std::to_string(n) + ":\n  committed: " + (more_a ? la : "(end)") +
             "\n  generated: " + (more_b ? lb : "(end)");
  }
}

// The declared ops that have no row and are not listed as composite or without a gradient.
std::vector<std::string> ops_without_row(const std::set<std::string>& declared, const std::vector<DerivativeRow>& rows) {
  std::set<std::string> covered = composite_ops();
  covered.merge(no_gradient_ops());
  for (const auto& r : rows)
    for (const auto& op : ops_covered_by(r)) covered.insert(op);
  std::vector<std::string> missing;
  for (const auto& op : declared)
    if (!covered.count(op)) missing.push_back(op);
  return missing;
}

} // namespace

TEST_CASE("derivatives: DERIVATIVES.md's table is the one the registrations generate") {
  const std::string path = std::string(HEADGRAD_SOURCE_DIR) + "/framework/ops/DERIVATIVES.md";
  const std::string committed = test_support::read_file(path);
  REQUIRE_FALSE(committed.empty());
  const std::vector<DerivativeRow> rows = derivative_rows();
  CHECK(rows.size() >= 45);
  const std::string generated = with_table(committed, derivatives_table(rows));
  const bool same = committed == generated; // (not the strings themselves: doctest would print both files)
  CHECK_MESSAGE(same, "framework/ops/DERIVATIVES.md differs from the rows the op families register; to write "
                      "the registered rows into it, run\n  "
                          << std::string(kRegenerate) << "\nFirst difference, " << first_difference(committed, generated));
  // the prose around the table stays: the file keeps its sections
  CHECK(committed.find("## Adding an op") != std::string::npos);
  CHECK(committed.find("## Differences from PyTorch 1.13") != std::string::npos);
}

TEST_CASE("derivatives: every op the op headers declare has a row, or is listed as composite or without gradient") {
  const std::set<std::string> declared = test_support::declared_ops();
  CHECK(declared.size() >= 75);
  const std::vector<DerivativeRow> rows = derivative_rows();
  for (const auto& op : ops_without_row(declared, rows))
    FAIL_CHECK(op << " is declared, but no registered DERIVATIVES row names it and no registration lists it as "
                     "composite or without gradient (framework/ops/DERIVATIVES.md, \"Adding an op\")");
  // (negative control: an op declared without a row is found)
  std::set<std::string> one_more = declared;
  one_more.insert("an_op_without_row");
  CHECK(ops_without_row(one_more, rows) == std::vector<std::string>{"an_op_without_row"});

  // and the other way: every op a row or a list names is declared (or is a Tensor method, as
  // contiguous), and none is both in a row and listed as composite or without gradient
  const std::string tensor_hpp = test_support::read_file(std::string(HEADGRAD_SOURCE_DIR) + "/framework/core/tensor.hpp");
  std::set<std::string> in_rows;
  for (const auto& r : rows)
    for (const auto& op : ops_named_by(r)) {
      in_rows.insert(op);
      CHECK_MESSAGE((declared.count(op) == 1 || tensor_hpp.find(" " + op + "(") != std::string::npos),
                    "the DERIVATIVES row \"" << r.op << "\" names " << op << ", which no op header declares");
    }
  for (const auto& listed : {composite_ops(), no_gradient_ops()})
    for (const auto& op : listed) {
      CHECK_MESSAGE(declared.count(op) == 1, op << " is listed by a registration, but no op header declares it");
      CHECK_MESSAGE(in_rows.count(op) == 0, op << " has a DERIVATIVES row and is listed as composite or without gradient");
    }
}

TEST_CASE("derivatives: every row is well formed and has a place of its own") {
  const std::vector<DerivativeRow> rows = derivative_rows(); // throws for a malformed row, two rows at one place
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DerivativeRow& r = rows[i];
    INFO(r.family << ": " << r.op);
    for (const std::string* cell : {&r.op, &r.forward, &r.backward, &r.saves, &r.where}) {
      CHECK_FALSE(cell->empty());
      // a '|' inside a cell is written "\|": a bare one would end the cell in the rendered table
      for (std::size_t k = cell->find('|'); k != std::string::npos; k = cell->find('|', k + 1))
        CHECK_MESSAGE((k > 0 && (*cell)[k - 1] == '\\'), "a bare '|' in \"" << *cell << "\"");
    }
    CHECK_NOTHROW((void)ops_named_by(r));
    if (i > 0) CHECK(rows[i - 1].place < r.place);
  }
  // the format: a place and five cells, a line that starts with a space continuing the row
  const auto two = parse_derivatives("f", "\n10 | a / b | `y = x` | `dx += dy` | — | `f.cpp` · `a`, `b`\n"
                                          "20 | c (a note, with a comma) | `y = [x \\| x]`\n    | `dx += dy` | —\n"
                                          "      and more | `f.cpp` · `c`\n");
  REQUIRE(two.size() == 2);
  CHECK(two[1].place == 20);
  CHECK(two[1].forward == "`y = [x \\| x]`");
  CHECK(two[1].saves == "— and more");
  CHECK(ops_covered_by(two[0]) == std::vector<std::string>{"a", "b", "a", "b"});
  CHECK(ops_covered_by(two[1]) == std::vector<std::string>{"c", "c"});
  CHECK_THROWS_AS((void)parse_derivatives("f", "10 | a | b | c | d"), std::invalid_argument);       // four cells
  CHECK_THROWS_AS((void)parse_derivatives("f", "a | b | c | d | e | f"), std::invalid_argument);    // no place
  CHECK_THROWS_AS((void)parse_derivatives("f", "  | b | c | d | e | f"), std::invalid_argument);    // continues nothing
  CHECK_THROWS_AS((void)ops_named_by({"f", 10, "softmax; log_softmax", "f", "b", "s", "w"}), std::invalid_argument);
  // the dropout row's op column says dropout, its function column dropout_with_mask: it covers both
  CHECK(ops_covered_by({"f", 10, "dropout", "f", "b", "s", "`dropout.cpp` · `dropout_with_mask`"}) ==
        std::vector<std::string>{"dropout", "dropout_with_mask"});
}

TEST_CASE("derivatives: the generated table replaces the old one and nothing else") {
  const std::vector<DerivativeRow> rows = parse_derivatives("f", "10 | neg | `y = −x` | `dx −= dy` | — | `a.cpp` · `neg`\n"
                                                                 "20 | concat | `[x_0 \\| x_1]` | slices of dy | sizes\n"
                                                                 "   | `b.cpp` · `concat`");
  const std::string table = derivatives_table(rows);
  CHECK(table.find("| concat | `[x_0 \\| x_1]` | slices of dy | sizes | `b.cpp` · `concat` |\n") != std::string::npos);
  const std::string doc = "# Title\n\nProse.\n\n" + std::string(kGeneratedTableComment) +
                          "\n| op | forward | backward (VJP) | saves | file · function |\n|---|---|---|---|---|\n"
                          "| old | row | here | — | `x.cpp` |\n\nAfter the table.\n";
  const std::string out = with_table(doc, table);
  CHECK(out == "# Title\n\nProse.\n\n" + table + "\nAfter the table.\n");
  CHECK(with_table(out, table) == out);
  CHECK_THROWS_AS((void)with_table("# Title\n\n| op |\n", table), std::invalid_argument);
}
