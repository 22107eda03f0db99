#include "framework/ops/promotion.hpp"

#include <fmt/format.h>

#include "framework/ops/ops.hpp"

namespace headgrad::ops {
namespace {

int rank_of(DType d) { // the promotion order
  switch (d) {
  case DType::bool8: return 0;
  case DType::i64: return 1;
  case DType::f32: return 2;
  case DType::f64: return 3;
  }
  return 0;
}
int category(DType d) { return d == DType::bool8 ? 0 : d == DType::i64 ? 1 : 2; }

} // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  check_defined(a, "result_type", "a");
  check_defined(b, "result_type", "b");
  const bool da = a.dim() > 0, db = b.dim() > 0;
  if (da == db) return rank_of(a.dtype()) >= rank_of(b.dtype()) ? a.dtype() : b.dtype();
  const Tensor& dimensioned = da ? a : b;
  const Tensor& zero_dim = da ? b : a;
  return category(zero_dim.dtype()) > category(dimensioned.dtype()) ? zero_dim.dtype() : dimensioned.dtype();
}

std::pair<Tensor, Tensor> arithmetic_operands(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "a");
  check_defined(b, op, "b");
  if (a.dtype() == b.dtype()) return {a, b};
  if (is_float(a.dtype()) && is_float(b.dtype())) {
    // a 0-d operand next to a dimensioned one takes its dtype (torch.result_type: same category, so
    // the dimensioned operand decides); its gradient comes back in its own dtype through to_dtype
    if (a.dim() == 0 && b.dim() > 0) return {to_dtype(a, b.dtype()), b};
    if (b.dim() == 0 && a.dim() > 0) return {a, to_dtype(b, a.dtype())};
    throw std::invalid_argument(fmt::format("{}: dtypes differ: {} {} and {} {}", op, a.shape(), dtype_name(a.dtype()),
                                            b.shape(), dtype_name(b.dtype())));
  }
  if (!is_float(a.dtype()) && !is_float(b.dtype()))
    throw std::invalid_argument(fmt::format("{}: no float operand: {} {} and {} {} (integer arithmetic is not "
                                            "supported; convert one with to_dtype)",
                                            op, a.shape(), dtype_name(a.dtype()), b.shape(), dtype_name(b.dtype())));
  // one float operand: the other (int64 or bool, no gradient) is converted to its dtype
  return is_float(a.dtype()) ? std::pair{a, to_dtype(b, a.dtype())} : std::pair{to_dtype(a, b.dtype()), b};
}

} // namespace headgrad::ops
