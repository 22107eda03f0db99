#include "train/explain/tensor_printer.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace headgrad::cli::explain {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

std::string format_value(double v, int precision) {
  std::string s = fmt::format("{:.{}f}", v, precision);
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

namespace {

// The blocks of a tensor as printed: rows of `cols` values, `rows` rows a block.
struct Blocks {
  std::int64_t blocks, rows, cols;
};
Blocks blocks_of(const Tensor& t) {
  const std::int64_t cols = t.shape().back();
  const std::int64_t rows = t.dim() >= 2 ? t.shape()[t.dim() - 2] : 1;
  return {cols * rows == 0 ? 0 : t.numel() / (cols * rows), rows, cols};
}

} // namespace

void TensorPrinter::summary_line(const std::string& name, const Tensor& t) {
  double largest = 0;
  bool zero = true; // every entry exactly 0 (a NaN is not)
  for (double v : t.to_vector()) {
    largest = std::max(largest, std::abs(v));
    zero = zero && v == 0;
  }
  out_ += zero ? fmt::format("{} {}: all 0\n", name, t.shape())
               : fmt::format("{} {}: not 0 (largest |entry| {})\n", name, t.shape(), format_value(largest, precision_));
}

void TensorPrinter::gradient(const std::string& name, const Tensor& t, const std::string& note, const Tensor& pytorch,
                             const std::string& pytorch_name) {
  if (summary_ || !pytorch.defined() || !(pytorch.shape() == t.shape()) || t.dim() == 0) {
    tensor(name, t, note);
    return;
  }
  out_ += fmt::format("{} {}{}\n  columns: ours | PyTorch ({}) | ours - PyTorch\n", name, t.shape(),
                      note.empty() ? "" : "  " + note, pytorch_name);
  const auto ours = t.to_vector(), theirs = pytorch.to_vector();
  const Blocks b = blocks_of(t);
  double worst = 0;
  for (std::int64_t k = 0; k < b.blocks; ++k) {
    if (b.blocks > 1) out_ += fmt::format("  [{}]\n", k);
    for (std::int64_t i = 0; i < b.rows; ++i) {
      std::string mine = "   ", torch = "  |", diff = "  |";
      for (std::int64_t j = 0; j < b.cols; ++j) {
        const auto at = static_cast<std::size_t>((k * b.rows + i) * b.cols + j);
        mine += fmt::format(" {:>{}}", format_value(ours[at], precision_), precision_ + 4);
        torch += fmt::format(" {:>{}}", format_value(theirs[at], precision_), precision_ + 4);
        diff += fmt::format(" {:>8.1e}", ours[at] - theirs[at]);
        worst = std::max(worst, std::abs(ours[at] - theirs[at]));
      }
      out_ += mine + torch + diff + "\n";
    }
  }
  out_ += fmt::format("  max |ours - PyTorch| = {:.1e}\n", worst);
}

void TensorPrinter::tensor(const std::string& name, const Tensor& t, const std::string& note) {
  if (summary_) {
    summary_line(name, t);
    return;
  }
  out_ += fmt::format("{} {}{}\n", name, t.shape(), note.empty() ? "" : "  " + note);
  const auto v = t.to_vector();
  if (t.dim() == 0) {
    out_ += fmt::format("  {}\n", format_value(v[0], precision_));
    return;
  }
  const auto [blocks, rows, cols] = blocks_of(t);
  const bool integers = t.dtype() == DType::i64 || t.dtype() == DType::bool8; // targets, lengths: no decimals
  for (std::int64_t b = 0; b < blocks; ++b) {
    if (blocks > 1) out_ += fmt::format("  [{}]\n", b);
    for (std::int64_t i = 0; i < rows; ++i) {
      out_ += "   ";
      for (std::int64_t j = 0; j < cols; ++j) {
        const double x = v[static_cast<std::size_t>((b * rows + i) * cols + j)];
        out_ += integers ? fmt::format(" {:>4}", static_cast<std::int64_t>(x))
                         : fmt::format(" {:>{}}", format_value(x, precision_), precision_ + 4);
      }
      out_ += "\n";
    }
  }
}

} // namespace headgrad::cli::explain
