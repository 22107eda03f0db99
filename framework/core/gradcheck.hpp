// gradcheck.hpp - checks a function's analytical gradients against central differences.
//
// Public API (not only a test helper): `headgrad gradcheck` and the test table use it, and so
// can anyone writing a new op. Like torch.autograd.gradcheck: float64, eps 1e-6, and an element
// passes when |analytical - numerical| <= atol + rtol * |numerical|.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  std::uint64_t seed = 1234; // of the random projection tensor
};

struct GradcheckInputReport {
  int input = 0;              // position in `inputs`
  std::string name;           // how reports name it: "input 3", or a parameter's dotted name
  Dims shape;
  bool checked = false;       // false for integer inputs (tokens, lengths)
  double max_abs_err = 0;     // max |analytical - numerical|
  double max_rel_err = 0;     // max |analytical - numerical| / max(|numerical|, atol)
  std::int64_t worst_index = -1; // flat index of the element with the largest violation
  double analytical_at_worst = 0, numerical_at_worst = 0;
  bool ok = true;
};

struct GradcheckResult {
  bool ok = true;
  std::vector<GradcheckInputReport> inputs;
  std::string summary() const; // one line per input
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// `fn` maps the inputs to one output tensor. Float inputs are copied to float64 leaves that
// require grad; integer inputs are passed as they are. The output is projected on a fixed random
// tensor R (L = sum(fn(x) * R)) before differencing, because plain sums hide errors (the sum of
// a softmax row is constant). Throws std::invalid_argument if `fn` does not return a float tensor.
GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

// The same check over tensors the function reads by itself (a module's parameters, say):
// `leaves` are contiguous float64 leaves that require grad, perturbed in place and restored;
// non-float entries are reported unchecked. Their .grad() is reset first.
GradcheckResult gradcheck_leaves(const std::function<Tensor()>& fn, const std::vector<Tensor>& leaves,
                                 const GradcheckOptions& options = {});
// The same with named leaves (a module's named_parameters(), say): reports name each leaf by its
// name ("blks.0.attention.W_q.weight") instead of its position.
GradcheckResult gradcheck_leaves(const std::function<Tensor()>& fn, const NamedTensors& leaves,
                                 const GradcheckOptions& options = {});

} // namespace headgrad
