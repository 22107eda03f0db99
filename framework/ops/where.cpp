// where.cpp - where(cond, a, b) and masked_fill: pick elementwise between two sources by a bool
// mask. The gradient follows the pick: each source gets dy where it was chosen and 0 elsewhere.
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/ops/map.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/promotion.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad::ops {
namespace {

void check_mask(const Tensor& m, const char* op, const Dims& other) {
  if (m.dtype() != DType::bool8)
    throw std::invalid_argument(fmt::format("{}: the mask must be bool, got {} of shape {} (input {})", op,
                                            dtype_name(m.dtype()), m.shape(), other));
}

// y = cond ? a : b, all three broadcast to `s`; a and b of one dtype (any: picking is not arithmetic).
Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b, const Dims& s, const char* name) {
  OpTimer timer(name);
  Tensor out = new_tensor(s, a.dtype());
  dispatch_any(a.dtype(), [&]<typename T>() {
    book::where_broadcast<T>(out.data<T>(), cond.data<bool>(), broadcast_strides(cond.shape(), cond.strides(), s),
                             a.data<T>(), broadcast_strides(a.shape(), a.strides(), s), b.data<T>(),
                             broadcast_strides(b.shape(), b.strides(), s), s);
  });
  return out;
}

} // namespace

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  check_defined(cond, "where", "cond");
  check_defined(a_in, "where", "a_in");
  check_defined(b_in, "where", "b_in");
  const auto [a, b] = arithmetic_operands(a_in, b_in, "where");
  check_mask(cond, "where", broadcast_shapes(a.shape(), b.shape(), "where"));
  const Dims s = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor y = select(cond, a, b, s, "where");
  // forward: y = cond ? a : b
  // local:   dy/da = [cond], dy/db = [not cond]
  // VJP:     da += where(cond, dy, 0);  db += where(cond, 0, dy)    (summed over broadcast axes)
  return record(y, "where", {cond, a, b}, // the operands as converted (see elementwise.cpp)
                [](Node& n, const Tensor& dy) {
    const Tensor cond = n.input(0), zero = Tensor::zeros({}, dy.dtype());
    if (n.needs_grad(1)) n.add_to_grad(1, where(cond, dy, zero));
    if (n.needs_grad(2)) n.add_to_grad(2, where(cond, zero, dy));
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined(x, "masked_fill", "x");
  check_defined(mask, "masked_fill", "mask");
  check_mask(mask, "masked_fill", x.shape());
  if (!(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape()))
    throw std::invalid_argument(
        fmt::format("masked_fill: mask {} does not broadcast to the input's shape {}", mask.shape(), x.shape()));
  Tensor y = select(mask, Tensor::scalar(value, x.dtype()), x, x.shape(), "masked_fill");
  // forward: y = mask ? value : x
  // VJP:     dx += where(mask, 0, dy)
  return record(y, "masked_fill", {mask, x}, [](Node& n, const Tensor& dy) {
    n.add_to_grad(1, where(n.input(0), Tensor::zeros({}, dy.dtype()), dy));
  });
}

} // namespace headgrad::ops
