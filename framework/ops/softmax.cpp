// softmax.cpp - softmax and log_softmax over the last axis (kernels/row_softmax.hpp) or any other
// (kernels/axis_softmax.hpp), and logsumexp. The masked forms (valid_lens, causal, boolean) are in
// masked_softmax.cpp and share the row kernels.
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels/axis_softmax.hpp"
#include "framework/engine/kernels/row_softmax.hpp"
#include "framework/ops/attention_mask.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/reduced_axes.hpp"
#include "framework/engine/profiler.hpp"

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

Tensor log_softmax(const Tensor& x) {
  check_defined(x, "log_softmax", "x");
  if (x.dim() == 0) return as_one_row(x, [](const Tensor& r) { return log_softmax(r); });
  OpTimer timer("log_softmax");
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  dispatch_float(x.dtype(), "log_softmax", [&]<typename T>() {
    kernels::log_softmax_forward<T>(out.data<T>(), xc.data<T>(), rows, cols);
  });
  // forward: y_i = x_i - log sum_j exp(x_j)
  // local:   dy_i/dx_k = delta_ik - softmax_k
  // VJP:     dx_k += dy_k - exp(y_k) sum_i dy_i
  // shapes:  x, y, dy, dx: (rows, cols)
  const Tensor y = out.detach();
  return record(out, "log_softmax", {x}, [y, rows, cols](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    dispatch_float(dy.dtype(), "log_softmax", [&]<typename T>() {
      kernels::log_softmax_backward<T>(dx.data<T>(), dx.first_write, dy.data<T>(), y.data<T>(), rows, cols);
    });
  });
}

// softmax (log = false) or log_softmax along an axis that is not the last: the same formulas over
// the (outer, len, inner) layout, kernels/axis_softmax.hpp.
static Tensor softmax_along(const Tensor& x, int axis, bool log, const char* name) {
  const AxisLayout l = axis_layout(x.shape(), axis);
  OpTimer timer(name);
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    if (log) kernels::log_softmax_axis_forward<T>(out.data<T>(), xc.data<T>(), l.outer, l.len, l.inner);
    else kernels::softmax_axis_forward<T>(out.data<T>(), xc.data<T>(), l.outer, l.len, l.inner);
  });
  // forward: y_k = exp(x_k) / sum_j exp(x_j)   or   y_k = x_k - log sum_j exp(x_j)   (along `axis`)
  // VJP:     dx_k += y_k (dy_k - sum_j dy_j y_j)  or  dx_k += dy_k - exp(y_k) sum_j dy_j
  // shapes:  x, y, dy, dx: (outer, len, inner)
  const Tensor y = out.detach();
  return record(out, name, {x}, [y, l, log, name](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    dispatch_float(dy.dtype(), name, [&]<typename T>() {
      auto backward = log ? kernels::log_softmax_axis_backward<T> : kernels::softmax_axis_backward<T>;
      backward(dx.data<T>(), dx.first_write, dy.data<T>(), y.data<T>(), l.outer, l.len, l.inner);
    });
  });
}

Tensor softmax(const Tensor& x, int axis) {
  check_defined(x, "softmax", "x");
  axis = softmax_axis(x, axis, "softmax");
  return x.dim() == 0 || axis == x.dim() - 1 ? softmax(x) : softmax_along(x, axis, false, "softmax");
}

Tensor log_softmax(const Tensor& x, int axis) {
  check_defined(x, "log_softmax", "x");
  axis = softmax_axis(x, axis, "log_softmax");
  if (x.dim() == 0) return log_softmax(x);
  return axis == x.dim() - 1 ? log_softmax(x) : softmax_along(x, axis, true, "log_softmax");
}

Tensor logsumexp(const Tensor& x, const Dims& axes, bool keepdim) {
  check_defined(x, "logsumexp", "x");
  const ReducedAxes r = reduced_axes(x.shape(), axes, "logsumexp");
  OpTimer timer("logsumexp");
  const Tensor rows = reduced_rows(x, r); // (kept elements, count)
  Tensor out = new_tensor(r.kept, x.dtype());
  dispatch_float(x.dtype(), "logsumexp", [&]<typename T>() {
    kernels::logsumexp_axis<T>(out.data<T>(), rows.data<T>(), r.kept.numel(), r.count, 1, /*shift_infinite=*/true);
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
