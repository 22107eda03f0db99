// dropout.cpp - inverted dropout: y = x * mask / (1 - p), mask ~ Bernoulli(1 - p).
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/random.hpp"

namespace headgrad::ops {

Tensor dropout_with_mask(const Tensor& x, const Tensor& mask, double p) {
  if (!(mask.shape() == x.shape()) || mask.dtype() != x.dtype())
    throw std::invalid_argument(fmt::format("dropout: mask {} {} does not match input {} {}", mask.shape(),
                                            dtype_name(mask.dtype()), x.shape(), dtype_name(x.dtype())));
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument(fmt::format("dropout: p = {} is outside [0, 1)", p));
  ForwardTimer timer("dropout");
  Tensor xc = x.contiguous(), mc = mask.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const double scale = 1.0 / (1.0 - p);
  dispatch_float(x.dtype(), "dropout", [&]<typename T>() {
    const T* px = xc.data<T>();
    const T* m = mc.data<T>();
    T* y = out.data<T>();
    const T s = static_cast<T>(scale);
    for (std::int64_t i = 0, n = out.numel(); i < n; ++i) y[i] = px[i] * m[i] * s;
  });
  // forward:  y = x * m / (1 - p)          local: dy/dx = m / (1 - p)
  // VJP:      dx += dy * m / (1 - p)        shapes: x, m, y, dy, dx all the same
  Tensor saved_mask = mc.detach();
  return record(out, "dropout", {xc}, [saved_mask, scale](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    dispatch_float(gx.dtype(), "dropout", [&]<typename T>() {
      const T* m = saved_mask.data<T>();
      const T* g = gy.data<T>();
      T* d = gx.data<T>();
      const T s = static_cast<T>(scale);
      for (std::int64_t i = 0, n = gx.numel(); i < n; ++i) d[i] += g[i] * m[i] * s;
    });
  });
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument(fmt::format("dropout: p = {} is outside [0, 1)", p));
  if (!training || p == 0.0) return x;
  Tensor mask = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "dropout", [&]<typename T>() {
    T* m = mask.data<T>();
    for (std::int64_t i = 0, n = mask.numel(); i < n; ++i) m[i] = gen.uniform() < p ? T(0) : T(1);
  });
  return dropout_with_mask(x, mask, p);
}

} // namespace headgrad::ops
