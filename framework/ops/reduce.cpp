// reduce.cpp - sum_to (the one summing op); sum, mean, var and std over axes. (max and min are in
// extrema.cpp, logsumexp in softmax.cpp.)
#include <algorithm>
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/broadcast.hpp"
#include "framework/kernels/accumulate.hpp"
#include "framework/ops/ops.hpp"
#include "framework/profiler.hpp"

namespace headgrad::ops {

Tensor sum_to(const Tensor& x, const Dims& shape) {
  if (!(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape()))
    throw std::invalid_argument(fmt::format("sum_to: shape {} does not broadcast to {}", shape, x.shape()));
  if (shape == x.shape()) return x;
  OpTimer timer("sum_to");
  Tensor out = new_tensor(shape, x.dtype());
  dispatch_float(x.dtype(), "sum_to", [&]<typename T>() {
    kernels::sum_into<T>(out.data<T>(), /*first_write=*/true, shape, x.data<T>(), x.shape(), x.strides(), T(1));
  });
  // forward: y[j] = sum of x[i] over the positions i that broadcast onto j
  // local:   dy_j/dx_i = 1 for those i
  // VJP:     dx += dy broadcast back to x's shape
  return record(out, "sum_to", {x}, [](Node& n, const Tensor& dy) {
    const Dims& xs = n.inputs[0]->shape;
    n.add_to_grad(0, make_view(dy, xs, broadcast_strides(dy.shape(), dy.strides(), xs), dy.impl()->offset));
  });
}

// Reduced shapes for `axes` (all axes when empty): with size-1 kept, and with them dropped; and
// how many elements each output element reduces (the product of the reduced axes' sizes).
struct Reduced {
  Dims kept, dropped;
  std::int64_t count = 1;
};
static Reduced reduced_shapes(const Dims& in, const Dims& axes, const char* op) {
  bool red[kMaxDims] = {};
  if (axes.empty())
    for (int i = 0; i < in.size(); ++i) red[i] = true;
  for (auto a : axes) {
    const int w = wrap_axis(static_cast<int>(a), in.size(), op);
    if (red[w]) throw std::invalid_argument(fmt::format("{}: axes {} repeat axis {}", op, axes, w));
    red[w] = true;
  }
  Reduced r;
  for (int i = 0; i < in.size(); ++i) {
    r.kept.push_back(red[i] ? 1 : in[i]);
    if (!red[i]) r.dropped.push_back(in[i]);
    if (red[i]) r.count *= in[i];
  }
  return r;
}

// The sum of an int64 or bool tensor: int64, as torch.sum (a count of true values for bool). No
// gradient: integers carry none.
static Tensor integer_sum(const Tensor& x, const Dims& kept) {
  const Tensor xi = to_dtype(x, DType::i64);
  Tensor out = new_tensor(kept, DType::i64);
  kernels::sum_into<std::int64_t>(out.data<std::int64_t>(), /*first_write=*/true, kept, xi.data<std::int64_t>(),
                                  xi.shape(), xi.strides(), 1);
  return out;
}

Tensor sum(const Tensor& x, const Dims& axes, bool keepdim) {
  const Reduced r = reduced_shapes(x.shape(), axes, "sum");
  Tensor s = !is_float(x.dtype()) ? integer_sum(x, r.kept) : r.kept == x.shape() ? clone(x) : sum_to(x, r.kept);
  return keepdim ? s : reshape(s, r.dropped);
}

Tensor mean(const Tensor& x, const Dims& axes, bool keepdim) {
  if (!is_float(x.dtype()))
    throw std::invalid_argument(fmt::format("mean: expected a float32 or float64 tensor, got {} of shape {}",
                                            dtype_name(x.dtype()), x.shape()));
  // count is the product of the reduced axes' sizes, so an empty kept axis is fine:
  // mean(zeros(0, 3), {1}) is the empty (0) tensor, as in PyTorch. An empty reduced axis leaves
  // 0/0 per output element: PyTorch returns NaN there, we refuse (a mean over nothing is almost
  // always a bug upstream, and a NaN found steps later is harder to trace).
  const Reduced r = reduced_shapes(x.shape(), axes, "mean");
  if (r.count == 0 && r.kept.numel() != 0)
    throw std::invalid_argument(fmt::format("mean: reducing an empty tensor of shape {}", x.shape()));
  return mul_scalar(sum(x, axes, keepdim), r.count == 0 ? 0.0 : 1.0 / static_cast<double>(r.count));
}

// Composed from mean, sub, mul, sum and div, so autograd gives the gradient
// dx = dy 2 (x - mean) / (N - correction) (the mean's own term sums to zero).
Tensor var(const Tensor& x, const Dims& axes, std::int64_t correction, bool keepdim) {
  const Reduced r = reduced_shapes(x.shape(), axes, "var");
  if (!is_float(x.dtype()) || (r.count == 0 && r.kept.numel() != 0))
    throw std::invalid_argument(fmt::format("var: needs a float tensor and a non-empty reduction, got {} of shape {}",
                                            dtype_name(x.dtype()), x.shape()));
  const Tensor c = x - mean(x, axes, true);
  // N - correction <= 0 divides by 0: inf, or NaN where the sum is 0 too, as PyTorch
  const double denom = static_cast<double>(std::max<std::int64_t>(0, r.count - correction));
  return sum(c * c, axes, keepdim) / Tensor::scalar(denom, x.dtype());
}

Tensor std(const Tensor& x, const Dims& axes, std::int64_t correction, bool keepdim) {
  return sqrt(var(x, axes, correction, keepdim));
}

} // namespace headgrad::ops
