// dropout.cpp - inverted dropout: y = x * mask / (1 - p), mask ~ Bernoulli(1 - p).
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/ops/dropout_draw.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/core/random.hpp"

namespace headgrad::ops {

Tensor dropout_with_mask(const Tensor& x, const Tensor& mask, double p) {
  check_defined(x, "dropout_with_mask", "x");
  check_defined(mask, "dropout_with_mask", "mask");
  if (!(mask.shape() == x.shape()) || mask.dtype() != x.dtype())
    throw std::invalid_argument(fmt::format("dropout_with_mask: mask {} {} does not match input {} {}", mask.shape(),
                                            dtype_name(mask.dtype()), x.shape(), dtype_name(x.dtype())));
  if (!(p >= 0.0 && p < 1.0))
    throw std::invalid_argument(fmt::format("dropout_with_mask: p = {} is outside [0, 1)", p));
  OpTimer timer("dropout");
  // keep_scaled = m / (1 - p): 0 where dropped, 1 / (1 - p) where kept
  const Tensor keep_scaled = mask.detach() * (1.0 / (1.0 - p));
  Tensor out = x.detach() * keep_scaled;
  // forward: y = x * m / (1 - p)          local: dy/dx = m / (1 - p)
  // VJP:     dx += dy * m / (1 - p)        shapes: x, m, y, dy, dx all the same
  return record(out, "dropout", {x}, [keep_scaled](Node& n, const Tensor& dy) { n.add_to_grad(0, dy * keep_scaled); });
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  check_defined(x, "dropout", "x");
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument(fmt::format("dropout: p = {} is outside [0, 1)", p));
  if (!training || p == 0.0) return x;
  Tensor mask = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "dropout", [&]<typename T>() {
    T* m = mask.data<T>();
    for (std::int64_t i = 0, n = mask.numel(); i < n; ++i) m[i] = dropout_keeps(gen, p) ? T(1) : T(0);
  });
  return dropout_with_mask(x, mask, p);
}

} // namespace headgrad::ops
