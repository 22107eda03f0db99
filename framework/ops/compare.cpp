// compare.cpp - comparisons and logical ops: broadcast, bool results, no gradient.
#include "framework/ops/compare.hpp"

#include <fmt/format.h>

#include <type_traits>

#include "framework/core/autograd.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/ops/map.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/promotion.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad::ops {
namespace {

// out (bool) = f(a, b) over the broadcast shape, both read as T.
template <typename T, typename F> Tensor compare_as(const Tensor& a_in, const Tensor& b_in, const char* name, const F& f) {
  const Dims s = broadcast_shapes(a_in.shape(), b_in.shape(), name);
  OpTimer timer(name);
  NoGradGuard no_grad; // the conversions below record nothing: a bool result has no gradient
  const DType d = std::is_same_v<T, float> ? DType::f32 : std::is_same_v<T, double> ? DType::f64
                  : std::is_same_v<T, bool> ? DType::bool8 : DType::i64;
  const Tensor a = to_dtype(a_in, d), b = to_dtype(b_in, d);
  Tensor out = new_tensor(s, DType::bool8);
  book::zip_broadcast<T>(out.data<bool>(), a.data<T>(), broadcast_strides(a.shape(), a.strides(), s), b.data<T>(),
                         broadcast_strides(b.shape(), b.strides(), s), s, [&f](T x, T y) { return f(x, y); });
  return out;
}

// A comparison reads both sides in their float type, or else as int64, which holds every integer
// and bool value exactly (false < true as 0 < 1): three instances of each comparison, not four.
template <typename F> Tensor compare_in(const Tensor& a, const Tensor& b, DType d, const char* name, const F& f) {
  switch (d) {
  case DType::f32: return compare_as<float>(a, b, name, f);
  case DType::f64: return compare_as<double>(a, b, name, f);
  default: return compare_as<std::int64_t>(a, b, name, f);
  }
}

template <typename F> Tensor compare(const Tensor& a, const Tensor& b, const char* name, const F& f) {
  check_defined(a, name, "a");
  check_defined(b, name, "b");
  return compare_in(a, b, result_type(a, b), name, f);
}

// A float tensor meets the scalar in its own dtype; an integer or bool one in float64, exactly.
template <typename F> Tensor compare(const Tensor& a, double s, const char* name, const F& f) {
  check_defined(a, name, "a");
  const DType d = is_float(a.dtype()) ? a.dtype() : DType::f64;
  return compare_in(a, Tensor::scalar(s, d), d, name, f);
}

const auto kEq = [](auto x, auto y) { return x == y; };
const auto kNe = [](auto x, auto y) { return x != y; };
const auto kLt = [](auto x, auto y) { return x < y; };
const auto kLe = [](auto x, auto y) { return x <= y; };
const auto kGt = [](auto x, auto y) { return x > y; };
const auto kGe = [](auto x, auto y) { return x >= y; };

} // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", kEq); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", kNe); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", kLt); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", kLe); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", kGt); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", kGe); }
Tensor eq(const Tensor& a, double s) { return compare(a, s, "eq", kEq); }
Tensor ne(const Tensor& a, double s) { return compare(a, s, "ne", kNe); }
Tensor lt(const Tensor& a, double s) { return compare(a, s, "lt", kLt); }
Tensor le(const Tensor& a, double s) { return compare(a, s, "le", kLe); }
Tensor gt(const Tensor& a, double s) { return compare(a, s, "gt", kGt); }
Tensor ge(const Tensor& a, double s) { return compare(a, s, "ge", kGe); }

Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_defined(a, "logical_and", "a");
  check_defined(b, "logical_and", "b");
  return compare_as<bool>(a, b, "logical_and", [](bool x, bool y) { return x && y; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_defined(a, "logical_or", "a");
  check_defined(b, "logical_or", "b");
  return compare_as<bool>(a, b, "logical_or", [](bool x, bool y) { return x || y; });
}
Tensor logical_not(const Tensor& a) {
  check_defined(a, "logical_not", "a");
  return compare_as<bool>(a, Tensor::scalar(0, DType::bool8), "logical_not", [](bool x, bool) { return !x; });
}

} // namespace headgrad::ops
