// reduce.cpp - sum_to (the one summing op); sum, mean, var and std over axes. (max and min are in
// extrema.cpp, logsumexp in softmax.cpp.)
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/core/strided.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/reduced_axes.hpp"

namespace headgrad::book {

// mean[r] = sum_k x[r, k] / len;  var[r] = sum_k (x[r, k] - mean[r])^2 / divisor (two passes), or
// its square root (root: the standard deviation, rooted before rounding to T), for the rows of a
// (rows, len) buffer. Accumulated in double: torch.var does so for float32 too, and so must we to
// agree with it where the squares of float32 values overflow (|x| > 1.8e19) or cancel. divisor =
// len - correction may be 0 (giving inf, or NaN for a zero sum, as PyTorch).
template <typename T>
void mean_var_rows(T* var, T* mean, const T* x, std::int64_t rows, std::int64_t len, double divisor, bool root) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * len;
    double m = 0;
    for (std::int64_t k = 0; k < len; ++k) m += static_cast<double>(xr[k]);
    m /= static_cast<double>(len);
    double s = 0;
    for (std::int64_t k = 0; k < len; ++k) s += (static_cast<double>(xr[k]) - m) * (static_cast<double>(xr[k]) - m);
    mean[r] = static_cast<T>(m);
    var[r] = static_cast<T>(root ? std::sqrt(s / divisor) : s / divisor);
  }
}

} // namespace headgrad::book

namespace headgrad::ops {

Tensor sum_to(const Tensor& x, const Dims& shape) {
  check_defined(x, "sum_to", "x");
  if (!(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape()))
    throw std::invalid_argument(fmt::format("sum_to: shape {} does not broadcast to {}", shape, x.shape()));
  if (shape == x.shape()) return x;
  OpTimer timer("sum_to");
  Tensor out = new_tensor(shape, x.dtype());
  dispatch_float(x.dtype(), "sum_to", [&]<typename T>() {
    book::sum_into<T>(out.data<T>(), /*first_write=*/true, shape, x.data<T>(), x.shape(), x.strides(), T(1));
  });
  // forward: y[j] = sum of x[i] over the positions i that broadcast onto j
  // local:   dy_j/dx_i = 1 for those i
  // VJP:     dx += dy broadcast back to x's shape
  return record(out, "sum_to", {x}, [](Node& n, const Tensor& dy) {
    const Dims& xs = n.inputs[0]->shape;
    n.add_to_grad(0, make_view(dy, xs, broadcast_strides(dy.shape(), dy.strides(), xs), dy.impl()->offset));
  });
}

ReducedAxes reduced_axes(const Dims& in, const Dims& axes, const char* op) {
  bool red[kMaxDims] = {};
  if (axes.empty())
    for (int i = 0; i < in.size(); ++i) red[i] = true;
  for (auto a : axes) {
    const int w = wrap_axis(static_cast<int>(a), in.size(), op);
    if (red[w]) throw std::invalid_argument(fmt::format("{}: axes {} repeat axis {}", op, axes, w));
    red[w] = true;
  }
  ReducedAxes r;
  for (int i = 0; i < in.size(); ++i) {
    r.kept.push_back(red[i] ? 1 : in[i]);
    if (!red[i]) r.dropped.push_back(in[i]);
    if (red[i]) r.count *= in[i];
  }
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < in.size(); ++i)
      if (red[i] == (pass == 1)) r.order.push_back(i);
  return r;
}

Tensor reduced_rows(const Tensor& x, const ReducedAxes& r) {
  NoGradGuard no_grad; // a copy for a kernel, not part of the graph
  return permute(x, r.order).contiguous();
}

// The sum of an int64 or bool tensor: int64, as torch.sum (a count of true values for bool). No
// gradient: integers carry none.
static Tensor integer_sum(const Tensor& x, const Dims& kept) {
  const Tensor xi = to_dtype(x, DType::i64);
  Tensor out = new_tensor(kept, DType::i64);
  book::sum_into<std::int64_t>(out.data<std::int64_t>(), /*first_write=*/true, kept, xi.data<std::int64_t>(),
                                  xi.shape(), xi.strides(), 1);
  return out;
}

Tensor sum(const Tensor& x, const Dims& axes, bool keepdim) {
  check_defined(x, "sum", "x");
  const ReducedAxes r = reduced_axes(x.shape(), axes, "sum");
  Tensor s = !is_float(x.dtype()) ? integer_sum(x, r.kept) : r.kept == x.shape() ? clone(x) : sum_to(x, r.kept);
  return keepdim ? s : reshape(s, r.dropped);
}

Tensor mean(const Tensor& x, const Dims& axes, bool keepdim) {
  check_defined(x, "mean", "x");
  if (!is_float(x.dtype()))
    throw std::invalid_argument(fmt::format("mean: expected a float32 or float64 tensor, got {} of shape {}",
                                            dtype_name(x.dtype()), x.shape()));
  // count is the product of the reduced axes' sizes, so an empty kept axis is fine:
  // mean(zeros(0, 3), {1}) is the empty (0) tensor, as in PyTorch. An empty reduced axis leaves
  // 0/0 per output element: PyTorch returns NaN there, we refuse (a mean over nothing is almost
  // always a bug upstream, and a NaN found steps later is harder to trace).
  const ReducedAxes r = reduced_axes(x.shape(), axes, "mean");
  if (r.count == 0 && r.kept.numel() != 0)
    throw std::invalid_argument(fmt::format("mean: reducing an empty tensor of shape {}", x.shape()));
  return mul_scalar(sum(x, axes, keepdim), r.count == 0 ? 0.0 : 1.0 / static_cast<double>(r.count));
}

// var, or std = sqrt(var) (root), over the reduced axes: the kernel accumulates in double and
// takes the root before rounding to x's dtype, as PyTorch (a float32 std of 1e29 has a variance
// beyond float32).
static Tensor moment(const Tensor& x, const Dims& axes, std::int64_t correction, bool keepdim, bool root,
                     const char* name) {
  const ReducedAxes r = reduced_axes(x.shape(), axes, name);
  if (!is_float(x.dtype()) || (r.count == 0 && r.kept.numel() != 0))
    throw std::invalid_argument(fmt::format("{}: needs a float tensor and a non-empty reduction, got {} of shape {}",
                                            name, dtype_name(x.dtype()), x.shape()));
  OpTimer timer(name);
  const Tensor rows = reduced_rows(x, r);
  Tensor out = new_tensor(r.kept, x.dtype()), mean = new_tensor(r.kept, x.dtype());
  // N - correction <= 0 divides by 0: inf, or NaN where the sum is 0 too, as PyTorch
  const double divisor = static_cast<double>(std::max<std::int64_t>(0, r.count - correction));
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    book::mean_var_rows<T>(out.data<T>(), mean.data<T>(), rows.data<T>(), r.kept.numel(), r.count, divisor, root);
  });
  // forward: v = sum_k (x_k - m)^2 / max(0, N - c), m = mean_k x_k (over the reduced axes); y = v or sqrt(v)
  // local:   dv/dx_k = 2 (x_k - m) / (N - c)  (the term through m sums to zero and is left out, as
  //          PyTorch does: an infinite x then gives an infinite gradient rather than NaN);
  //          dy/dv = 1 / (2 y) for std, taken as 0 where y = 0 (PyTorch's choice at the kink)
  // VJP:     g = dy (var) or where(y == 0, 0, dy / (2 y)) (std);  dx += (2 / (N - c)) g (x - m)
  //          (dy, y, m with the reduced axes kept as size 1, broadcast). N - c is not clamped
  //          here, as in PyTorch's var_backward: a correction above N gives a finite, negative
  //          scale (var; std's g is dy / inf = 0 then) where the forward is inf.
  const Tensor y = out.detach();
  const double scale = 2.0 / static_cast<double>(r.count - correction);
  Tensor result = record(out, name, {x}, [y, mean, root, scale](Node& n, const Tensor& dy) {
    const Tensor g = root ? where(eq(y, 0.0), Tensor::zeros({}, dy.dtype()), dy / (y * 2.0)) : dy;
    n.add_to_grad(0, mul_scalar(g, scale) * (n.input(0) - mean));
  });
  return keepdim ? result : reshape(result, r.dropped);
}

Tensor var(const Tensor& x, const Dims& axes, std::int64_t correction, bool keepdim) {
  check_defined(x, "var", "x");
  return moment(x, axes, correction, keepdim, false, "var");
}

Tensor std(const Tensor& x, const Dims& axes, std::int64_t correction, bool keepdim) {
  check_defined(x, "std", "x");
  return moment(x, axes, correction, keepdim, true, "std");
}

} // namespace headgrad::ops
