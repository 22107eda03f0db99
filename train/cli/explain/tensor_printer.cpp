#include "train/cli/explain/tensor_printer.hpp"

#include <fmt/format.h>

namespace headgrad::cli::explain {

std::string format_value(double v, int precision) {
  std::string s = fmt::format("{:.{}f}", v, precision);
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

void TensorPrinter::tensor(const std::string& name, const Tensor& t, const std::string& note) {
  out_ += fmt::format("{} {}{}\n", name, t.shape(), note.empty() ? "" : "  " + note);
  const auto v = t.to_vector();
  if (t.dim() == 0) {
    out_ += fmt::format("  {}\n", format_value(v[0], precision_));
    return;
  }
  const std::int64_t cols = t.shape().back();
  const std::int64_t rows = t.dim() >= 2 ? t.shape()[t.dim() - 2] : 1;
  const std::int64_t blocks = cols * rows == 0 ? 0 : t.numel() / (cols * rows);
  for (std::int64_t b = 0; b < blocks; ++b) {
    if (blocks > 1) out_ += fmt::format("  [{}]\n", b);
    for (std::int64_t i = 0; i < rows; ++i) {
      out_ += "   ";
      for (std::int64_t j = 0; j < cols; ++j)
        out_ += fmt::format(" {:>{}}", format_value(v[static_cast<std::size_t>((b * rows + i) * cols + j)], precision_),
                            precision_ + 4);
      out_ += "\n";
    }
  }
}

} // namespace headgrad::cli::explain
