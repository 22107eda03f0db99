// reduce.cpp - sum_to (the one summing kernel), sum and mean over axes, max over an axis.
#include <fmt/format.h>
#include <limits>

#include "framework/autograd.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/broadcast.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {

Tensor sum_to(const Tensor& x, const Dims& shape) {
  if (!(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape()))
    throw std::invalid_argument(fmt::format("sum_to: shape {} does not broadcast to {}", shape, x.shape()));
  if (shape == x.shape()) return x;
  ForwardTimer timer("sum_to");
  Tensor out = Tensor::zeros(shape, x.dtype());
  const Dims ostr = broadcast_strides(shape, out.strides(), x.shape());
  dispatch_float(x.dtype(), "sum_to", [&]<typename T>() {
    T* y = out.data<T>();
    const T* px = x.data<T>();
    kernels::for_each_row<2>(x.shape(), std::array<Dims, 2>{ostr, x.strides()},
                             [&](const auto& o, std::int64_t m, const auto& in) {
                               T* yr = y + o[0];
                               const T* xr = px + o[1];
                               if (in[0] == 0) {
                                 T acc = 0;
                                 for (std::int64_t i = 0; i < m; ++i) acc += xr[i * in[1]];
                                 yr[0] += acc;
                               } else {
                                 for (std::int64_t i = 0; i < m; ++i) yr[i * in[0]] += xr[i * in[1]];
                               }
                             });
  });
  // forward:  y[j] = sum of x[i] over the positions i that broadcast onto j
  // local:    dy_j/dx_i = 1 for those i
  // VJP:      dx_i += dy_j   (dy broadcast back to x's shape)
  // shapes:   x, dx: x's shape; y, dy: `shape` (x's rank or fewer leading dims)
  return record(out, "sum_to", {x}, [](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    const Dims gstr = broadcast_strides(gy.shape(), gy.strides(), gx.shape());
    dispatch_float(gx.dtype(), "sum_to", [&]<typename T>() {
      T* d = gx.data<T>();
      const T* g = gy.data<T>();
      kernels::for_each_row2(gx.shape(), gx.strides(), gstr,
                             [&](std::int64_t od, std::int64_t og, std::int64_t m, std::int64_t, std::int64_t sg) {
                               for (std::int64_t i = 0; i < m; ++i) d[od + i] += g[og + i * sg];
                             });
    });
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
  ForwardTimer timer("max");
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
  // forward:  y = max_k x[.., k, ..]     local: 1 at the first argmax, 0 elsewhere
  // VJP:      dx[.., argmax, ..] += dy   shapes: x (.., len, ..), y/dy (.., 1, ..)
  Tensor r = record(out, "max", {xc}, [arg, len, inner, outer](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    dispatch_float(gx.dtype(), "max", [&]<typename T>() {
      T* d = gx.data<T>();
      const T* g = gy.data<T>();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i)
          d[o * len * inner + (*arg)[static_cast<std::size_t>(o * inner + i)] * inner + i] += g[o * inner + i];
    });
  });
  if (keepdim) return r;
  Dims dropped;
  for (int i = 0; i < x.dim(); ++i)
    if (i != axis) dropped.push_back(x.shape()[i]);
  return reshape(r, dropped);
}

} // namespace headgrad::ops
