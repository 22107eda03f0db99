// reduce.cpp - sum_to (the one summing op), sum and mean over axes, max over an axis.
#include <fmt/format.h>
#include <memory>

#include "framework/autograd.hpp"
#include "framework/broadcast.hpp"
#include "framework/kernels/accumulate.hpp"
#include "framework/kernels/scatter.hpp"
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

// Reduced shapes for `axes` (all axes when empty): with size-1 kept, and with them dropped.
static void reduced_shapes(const Dims& in, const Dims& axes, const char* op, Dims& kept, Dims& dropped) {
  bool red[kMaxDims] = {};
  if (axes.empty())
    for (int i = 0; i < in.size(); ++i) red[i] = true;
  for (auto a : axes) {
    const int w = wrap_axis(static_cast<int>(a), in.size(), op);
    if (red[w]) throw std::invalid_argument(fmt::format("{}: axes {} repeat axis {}", op, axes, w));
    red[w] = true;
  }
  kept = Dims();
  dropped = Dims();
  for (int i = 0; i < in.size(); ++i) {
    kept.push_back(red[i] ? 1 : in[i]);
    if (!red[i]) dropped.push_back(in[i]);
  }
}

Tensor sum(const Tensor& x, const Dims& axes, bool keepdim) {
  Dims kept, dropped;
  reduced_shapes(x.shape(), axes, "sum", kept, dropped);
  Tensor s = kept == x.shape() ? clone(x) : sum_to(x, kept);
  return keepdim ? s : reshape(s, dropped);
}

Tensor mean(const Tensor& x, const Dims& axes, bool keepdim) {
  Dims kept, dropped;
  reduced_shapes(x.shape(), axes, "mean", kept, dropped);
  const std::int64_t count = kept.numel() == 0 ? 0 : x.numel() / kept.numel();
  if (count == 0) throw std::invalid_argument(fmt::format("mean: reducing an empty tensor of shape {}", x.shape()));
  return mul_scalar(sum(x, axes, keepdim), 1.0 / static_cast<double>(count));
}

Tensor max(const Tensor& x, int axis, bool keepdim) {
  axis = wrap_axis(axis, x.dim(), "max");
  const std::int64_t len = x.shape()[axis];
  if (len == 0) throw std::invalid_argument(fmt::format("max: axis {} of shape {} is empty", axis, x.shape()));
  OpTimer timer("max");
  Tensor xc = x.contiguous();
  Dims kept = x.shape();
  kept[axis] = 1;
  Tensor out = new_tensor(kept, x.dtype());
  // Layout (outer, len, inner): the reduced axis in the middle.
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape()[i];
  for (int i = axis + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  auto arg = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(outer * inner));
  dispatch_float(x.dtype(), "max", [&]<typename T>() {
    const T* px = xc.data<T>();
    T* y = out.data<T>();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        const T* base = px + o * len * inner + i;
        std::int64_t best = 0;
        for (std::int64_t k = 1; k < len; ++k)
          if (base[k * inner] > base[best * inner]) best = k;
        y[o * inner + i] = base[best * inner];
        (*arg)[static_cast<std::size_t>(o * inner + i)] = best;
      }
  });
  // forward: y = max_k x[.., k, ..]       local: 1 at the first argmax, 0 elsewhere
  // VJP:     dx[.., argmax, ..] += dy      shapes: x (outer, len, inner), y/dy (outer, 1, inner)
  Tensor r = record(out, "max", {xc}, [arg, len, inner, outer](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    dispatch_float(dy.dtype(), "max", [&]<typename T>() {
      kernels::gather_add<T>(dx.data<T>(), dx.first_write, dy.data<T>(), arg->data(), outer, len, 1, inner);
    });
  });
  if (keepdim) return r;
  Dims dropped;
  for (int i = 0; i < x.dim(); ++i)
    if (i != axis) dropped.push_back(x.shape()[i]);
  return reshape(r, dropped);
}

} // namespace headgrad::ops
