// softmax.cpp - softmax and log_softmax over the last axis, over any other (the same ops on the
// axis moved last), and logsumexp. The masked forms (valid_lens, causal, boolean) are in
// masked_softmax.cpp and share its kernels.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/attention_mask.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/reduced_axes.hpp"

namespace headgrad::ops {

namespace {
// A 0-d x as one row of one element, and the result back as 0-d (PyTorch's softmax of a scalar).
template <typename F> Tensor as_one_row(const Tensor& x, F&& f) { return reshape(f(reshape(x, {1})), {}); }

// `axis` of x in [0, rank), a 0-d x taking 0 or -1 as PyTorch does.
int softmax_axis(const Tensor& x, int axis, const char* op) {
  if (x.dim() > 0) return wrap_axis(axis, x.dim(), op);
  if (axis != 0 && axis != -1)
    throw std::invalid_argument(fmt::format("{}: axis {} is out of range for a 0-d tensor (0 or -1)", op, axis));
  return 0;
}
} // namespace

// forward: y_i = exp(x_i) / sum_j exp(x_j)       (per row of the last axis)
// local:   dy_i/dx_k = y_i (delta_ik - y_k)
// VJP:     dx_k += y_k (dy_k - sum_i dy_i y_i)
// shapes:  x, y, dy, dx: (rows, cols); softmax keeps its output, not its input
// The row softmax with no key masked: masked_softmax.cpp has the forward and backward.
Tensor softmax(const Tensor& x) {
  check_defined(x, "softmax", "x");
  if (x.dim() == 0) return as_one_row(x, [](const Tensor& r) { return softmax(r); });
  return softmax_rows(x, {}, "softmax");
}

// forward: y_i = (x_i - m) - log sum_j exp(x_j - m), m the row's max, in that order (PyTorch's):
//          x - (m + log s) would round log s to the spacing of m (3e-3 relative at logits of 1e5 in
//          float32). m, taken as a constant, changes no y: the composed ops' gradient is the VJP
//          dx_k = dy_k - exp(y_k) sum_i dy_i. A NaN, or an all -inf row, makes the row NaN.
Tensor log_softmax(const Tensor& x) {
  check_defined(x, "log_softmax", "x");
  if (x.dim() == 0) return as_one_row(x, [](const Tensor& r) { return log_softmax(r); });
  dispatch_float(x.dtype(), "log_softmax", []<typename T>() {}); // (a float32 or float64 x, or the op's error)
  if (x.numel() == 0) return clone(x); // rows of no elements (or no rows): nothing to normalise
  const Tensor z = sub(x, max(x, -1, /*keepdim=*/true).detach());
  return sub(z, log(sum(exp(z), {-1}, /*keepdim=*/true)));
}

// softmax (log = false) or log_softmax along an axis that is not the last: the last-axis op on x with
// that axis moved last, then moved back (its gradient goes back through both moves).
static Tensor softmax_along(const Tensor& x, int axis, bool log) {
  const Tensor last = transpose(x, axis, -1);
  return transpose(log ? log_softmax(last) : softmax(last), axis, -1);
}

Tensor softmax(const Tensor& x, int axis) {
  check_defined(x, "softmax", "x");
  axis = softmax_axis(x, axis, "softmax");
  return x.dim() == 0 || axis == x.dim() - 1 ? softmax(x) : softmax_along(x, axis, false);
}

Tensor log_softmax(const Tensor& x, int axis) {
  check_defined(x, "log_softmax", "x");
  axis = softmax_axis(x, axis, "log_softmax");
  if (x.dim() == 0) return log_softmax(x);
  return axis == x.dim() - 1 ? log_softmax(x) : softmax_along(x, axis, true);
}

Tensor logsumexp(const Tensor& x, const Dims& axes, bool keepdim) {
  check_defined(x, "logsumexp", "x");
  const ReducedAxes r = reduced_axes(x.shape(), axes, "logsumexp");
  OpTimer timer("logsumexp");
  const Tensor rows = reduced_rows(x, r); // (kept elements, count)
  Tensor out = new_tensor(r.kept, x.dtype());
  dispatch_float(x.dtype(), "logsumexp", [&]<typename T>() {
    for (std::int64_t i = 0, n = r.kept.numel(); i < n; ++i) { // y = m + log sum_k exp(x_k - m), m the row's max
      const T* xr = rows.data<T>() + i * r.count;
      T m = r.count == 0 ? T(0) : *std::max_element(xr, xr + r.count); // (a NaN it skips reaches the sum)
      if (std::isinf(m)) m = 0; // PyTorch's: -inf for an all -inf row, +inf for a row holding +inf
      T s = 0;
      for (std::int64_t k = 0; k < r.count; ++k) s += std::exp(xr[k] - m);
      out.data<T>()[i] = m + std::log(s);
    }
  });
  // forward: y = log sum_k exp(x_k)        (over the reduced axes; PyTorch's shift: -inf for an all
  //                                          -inf row, +inf for a row holding +inf)
  // local:   dy/dx_k = exp(x_k - y) = softmax(x)_k
  // VJP:     dx += dy * exp(x - y)         (dy and y with the reduced axes kept as size 1, broadcast)
  const Tensor y = out.detach();
  Tensor lse = record(out, "logsumexp", {x}, [y](Node& n, const Tensor& dy) {
    n.add_to_grad(0, dy * exp(n.input(0) - y));
  });
  return keepdim ? lse : reshape(lse, r.dropped);
}

} // namespace headgrad::ops
