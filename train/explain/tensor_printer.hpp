// tensor_printer.hpp - how `headgrad explain` prints: lines, headings, and tensors as a name, a
// shape and the values (a 3-D tensor as one matrix block per leading index), gradients beside
// PyTorch's when explain runs on a fixture.
#pragma once
#include <string>

#include "framework/core/tensor.hpp"

namespace headgrad::cli::explain {

// `v` with `precision` decimals; a value that rounds to zero prints as 0.0000, never -0.0000
// (masked entries hold -0.0 or tiny negatives, which are zero as far as the reader can tell).
std::string format_value(double v, int precision);
// max |a - b| over the elements of two tensors of one shape (how explain compares two ways of
// computing the same gradient).
double max_abs_diff(const Tensor& a, const Tensor& b);

class TensorPrinter {
public:
  // summary: every tensor as one line, its name and shape and "all 0" or "not 0 (largest |entry| v)",
  // instead of its values (to see at a glance which tensors vanish).
  explicit TensorPrinter(int precision, bool summary = false) : precision_(precision), summary_(summary) {}
  int precision() const { return precision_; }
  void line(const std::string& s = "") { out_ += s + "\n"; }
  void heading(const std::string& s) { out_ += "\n== " + s + " ==\n"; }
  void tensor(const std::string& name, const Tensor& t, const std::string& note = "");
  // A gradient beside PyTorch's value of it (`pytorch`, same shape): each row as ours | PyTorch |
  // ours - PyTorch, then the largest difference. Without a PyTorch value, tensor().
  void gradient(const std::string& name, const Tensor& t, const std::string& note, const Tensor& pytorch,
                const std::string& pytorch_name);
  std::string take() { return std::move(out_); }

private:
  void summary_line(const std::string& name, const Tensor& t);

  int precision_;
  bool summary_;
  std::string out_;
};

} // namespace headgrad::cli::explain
