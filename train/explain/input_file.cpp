#include "train/explain/input_file.hpp"

#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace headgrad::cli::explain {
namespace {

const std::set<std::string> kTensorNames = {"queries",    "keys",       "values",     "valid_lens", "W_q.weight",
                                            "W_k.weight", "W_v.weight", "W_o.weight", "grad_output"};

// One tensor of the file while its values are read.
struct Pending {
  std::string name;
  int line = 0;
  Dims shape;
  std::vector<double> values;
  bool open = false; // its values may go on over the next lines
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The numbers of `text` (separated by spaces or commas); throws naming the first one that is not.
std::vector<double> numbers_of(const std::string& text, const std::string& where) {
  std::string t = text;
  for (char& c : t)
    if (c == ',') c = ' ';
  std::istringstream in(t);
  std::vector<double> out;
  std::string word;
  while (in >> word) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || !std::isfinite(v))
      throw std::invalid_argument(fmt::format("{}: '{}' is not a finite number", where, word));
    out.push_back(v);
  }
  return out;
}

// "[2, 3, 4]" -> {2, 3, 4}
Dims shape_of(const std::string& text, const std::string& where) {
  std::vector<std::int64_t> dims;
  for (double v : numbers_of(text, where)) {
    if (v < 1 || v != std::floor(v) || v > 1e6)
      throw std::invalid_argument(fmt::format("{}: a size must be a whole number from 1 to 10^6, got {}", where, v));
    dims.push_back(static_cast<std::int64_t>(v));
  }
  if (dims.empty()) throw std::invalid_argument(fmt::format("{}: the shape [...] is empty", where));
  double n = 1;
  for (std::int64_t d : dims) n *= static_cast<double>(d);
  if (n > 1e6) // explain prints every value: an example is tiny
    throw std::invalid_argument(fmt::format("{}: a tensor of at most 10^6 values, got {}", where, n));
  if (dims.size() > 8) throw std::invalid_argument(fmt::format("{}: at most 8 dimensions", where));
  return Dims(dims);
}

class Reader {
public:
  explicit Reader(std::string path) { f_.path = std::move(path); }

  InputFile read() {
    std::ifstream in(f_.path);
    if (!in) throw std::invalid_argument(fmt::format("{}: cannot read the file", f_.path));
    std::string raw;
    int n = 0;
    while (std::getline(in, raw)) {
      ++n;
      const std::string line = trim(raw.substr(0, raw.find('#')));
      if (!line.empty()) statement(line, n);
    }
    finish_pending();
    resolve_num_hiddens();
    check_whole();
    return std::move(f_);
  }

  // num_hiddens: as given, else the rows of the first weight the file gives, else the queries'
  // feature size (d2l 1.0's LazyLinear layers take theirs from the inputs the same way).
  void resolve_num_hiddens() {
    if (f_.num_hiddens > 0) return;
    for (const char* w : {"W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"})
      if (f_.has(w)) {
        f_.num_hiddens = f_.tensors.at(w).shape()[0];
        return;
      }
    if (f_.has("queries") && f_.tensors.at("queries").dim() == 3) f_.num_hiddens = f_.tensors.at("queries").shape()[2];
  }

private:
  std::string at(int line) const { return fmt::format("{}:{}", f_.path, line); }

  void statement(const std::string& line, int n) {
    const char c = line[0];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.') { // more values
      if (!pending_.open)
        throw std::invalid_argument(fmt::format("{}: numbers outside a tensor (a tensor is 'name [shape] = values')",
                                                at(n)));
      const auto more = numbers_of(line, at(n));
      pending_.values.insert(pending_.values.end(), more.begin(), more.end());
      return;
    }
    finish_pending();
    // the name: letters, digits, '_' and '.' (W_q.weight), up to a space, '[' or '='
    std::size_t end = 0;
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_' ||
                                 line[end] == '.'))
      ++end;
    const std::string name = line.substr(0, end);
    if (name.empty()) throw std::invalid_argument(fmt::format("{}: expected a name, got '{}'", at(n), line));
    if (name == "num_heads" || name == "num_hiddens") {
      if (seen_.count(name)) throw std::invalid_argument(fmt::format("{}: {} is given twice", at(n), name));
      seen_.insert(name);
      const auto v = numbers_of(line.substr(end), at(n));
      if (v.size() != 1 || v[0] < 1 || v[0] != std::floor(v[0]) || v[0] > 1e6)
        throw std::invalid_argument(fmt::format("{}: {} takes one whole number from 1 to 10^6", at(n), name));
      (name == "num_heads" ? f_.num_heads : f_.num_hiddens) = static_cast<std::int64_t>(v[0]);
      return;
    }
    if (!kTensorNames.count(name))
      throw std::invalid_argument(fmt::format("{}: unknown name '{}' (tensors: queries, keys, values, valid_lens, "
                                              "W_q.weight, W_k.weight, W_v.weight, W_o.weight, grad_output; settings: "
                                              "num_heads, num_hiddens)",
                                              at(n), name));
    if (f_.has(name) || seen_.count(name))
      throw std::invalid_argument(fmt::format("{}: {} is given twice", at(n), name));
    seen_.insert(name);
    const std::string rest = trim(line.substr(name.size()));
    if (!rest.empty() && rest[0] == '=') { // an alias: the same numbers as a tensor given before
      const std::string other = trim(rest.substr(1));
      if (!f_.has(other))
        throw std::invalid_argument(
          fmt::format("{}: {} = {}: {} is not a tensor given above", at(n), name, other, other));
      f_.tensors[name] = f_.tensors.at(other).clone();
      f_.aliases.emplace_back(name, other);
      return;
    }
    const auto close = rest.find(']');
    const auto eq = rest.find('=', close == std::string::npos ? 0 : close);
    if (rest.empty() || rest[0] != '[' || close == std::string::npos || eq == std::string::npos)
      throw std::invalid_argument(
          fmt::format("{}: expected '{} [shape] = values' (values: numbers, ones, zeros or normal) or '{} = other'",
                      at(n), name, name));
    pending_ = Pending{name, n, shape_of(rest.substr(1, close - 1), at(n)), {}, false};
    const std::string values = trim(rest.substr(eq + 1));
    if (values == "ones" || values == "zeros" || values == "normal") {
      if (name == "valid_lens" && values == "normal")
        throw std::invalid_argument(fmt::format("{}: valid_lens are whole numbers, not normal", at(n)));
      pending_.values.assign(static_cast<std::size_t>(pending_.shape.numel()), values == "ones" ? 1.0 : 0.0);
      if (values == "normal") f_.normal.push_back(name);
    } else {
      pending_.values = numbers_of(values, at(n));
      pending_.open = true;
    }
  }

  void finish_pending() {
    if (pending_.name.empty()) return;
    const Pending p = std::move(pending_);
    pending_ = Pending{};
    const std::string where = at(p.line);
    if (static_cast<std::int64_t>(p.values.size()) != p.shape.numel())
      throw std::invalid_argument(fmt::format("{}: {}: {} values for shape {} ({})", where, p.name, p.values.size(),
                                              p.shape, p.shape.numel()));
    if (p.name == "valid_lens") {
      std::vector<std::int64_t> lens;
      for (double v : p.values) {
        if (v < 0 || v != std::floor(v) || v > 1e9)
          throw std::invalid_argument(fmt::format("{}: valid_lens must be whole numbers >= 0, got {}", where, v));
        lens.push_back(static_cast<std::int64_t>(v));
      }
      f_.tensors[p.name] = Tensor::from_ints(lens, p.shape);
    } else {
      f_.tensors[p.name] = Tensor::from(p.values, p.shape, DType::f64);
    }
  }

  // What the file as a whole must hold: the required entries, and shapes that fit each other.
  void check_whole() const {
    const std::string& path = f_.path;
    for (const char* name : {"queries", "keys", "values"})
      if (!f_.has(name)) throw std::invalid_argument(fmt::format("{}: {} is missing", path, name));
    if (f_.num_heads == 0) throw std::invalid_argument(fmt::format("{}: num_heads is missing", path));
    const Dims q = f_.tensors.at("queries").shape(), k = f_.tensors.at("keys").shape(),
               v = f_.tensors.at("values").shape();
    if (q.size() != 3 || k.size() != 3 || v.size() != 3 || q[0] != k[0] || k[0] != v[0] || k[1] != v[1])
      throw std::invalid_argument(fmt::format("{}: queries (B, Tq, q), keys (B, Tk, k), values (B, Tk, v) do not fit: "
                                              "{}, {}, {}",
                                              path, q, k, v));
    const std::int64_t h = f_.num_hiddens;
    if (h % f_.num_heads != 0)
      throw std::invalid_argument(fmt::format("{}: num_hiddens ({}) must be divisible by num_heads ({})", path, h,
                                              f_.num_heads));
    if (f_.has("valid_lens")) {
      const Dims l = f_.tensors.at("valid_lens").shape();
      if (!((l.size() == 1 && l[0] == q[0]) || (l.size() == 2 && l[0] == q[0] && l[1] == q[1])))
        throw std::invalid_argument(fmt::format("{}: valid_lens must be (batch) = [{}] or (batch, queries) = [{}, {}], "
                                                "got {}",
                                                path, q[0], q[0], q[1], l));
      for (std::int64_t len : f_.tensors.at("valid_lens").to_int_vector())
        if (len > k[1])
          throw std::invalid_argument(fmt::format("{}: a valid length ({}) above the number of keys ({})", path, len,
                                                  k[1]));
    }
    const std::map<std::string, Dims> expected = {{"W_q.weight", Dims({h, q[2]})}, {"W_k.weight", Dims({h, k[2]})},
                                                  {"W_v.weight", Dims({h, v[2]})}, {"W_o.weight", Dims({h, h})},
                                                  {"grad_output", Dims({q[0], q[1], h})}};
    for (const auto& [name, shape] : expected)
      if (f_.has(name) && !(f_.tensors.at(name).shape() == shape))
        throw std::invalid_argument(fmt::format("{}: {} must be {} here, got {}", path, name, shape,
                                                f_.tensors.at(name).shape()));
  }

  InputFile f_;
  Pending pending_;
  std::set<std::string> seen_;
};

} // namespace

InputFile read_input_file(const std::string& path) { return Reader(path).read(); }

} // namespace headgrad::cli::explain
