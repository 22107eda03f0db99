// dtype.hpp - the runtime element types a Tensor can hold, and the dispatch helper that turns a
// runtime dtype into a template parameter so one kernel body serves float32 and float64.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace headgrad {

enum class DType : std::uint8_t {
  f32,  // training
  f64,  // gradient checks
  i64,  // tokens, targets, valid_lens
  bool8 // boolean masks (one byte per element; nonzero = true)
};

const char* dtype_name(DType d);
std::size_t dtype_size(DType d);
inline bool is_float(DType d) { return d == DType::f32 || d == DType::f64; }

// Calls fn.template operator()<T>() with the C++ type T of dtype d: float, double, std::int64_t or
// bool. For code that moves elements of any type (copies, conversions, factories).
template <typename Fn> decltype(auto) dispatch_any(DType d, Fn&& fn) {
  switch (d) {
  case DType::f32: return fn.template operator()<float>();
  case DType::f64: return fn.template operator()<double>();
  case DType::i64: return fn.template operator()<std::int64_t>();
  case DType::bool8: break;
  }
  return fn.template operator()<bool>();
}

// The same for arithmetic, which exists for float32 and float64 only: any other dtype throws
// std::invalid_argument naming the op, so the user sees which call got the wrong tensor.
template <typename Fn> decltype(auto) dispatch_float(DType d, const char* op, Fn&& fn) {
  switch (d) {
  case DType::f32: return fn.template operator()<float>();
  case DType::f64: return fn.template operator()<double>();
  default:
    throw std::invalid_argument(std::string(op) + ": expected a float32 or float64 tensor, got " +
                                dtype_name(d));
  }
}

} // namespace headgrad
