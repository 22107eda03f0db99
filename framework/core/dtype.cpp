#include "framework/core/dtype.hpp"

namespace headgrad {

const char* dtype_name(DType d) {
  switch (d) {
  case DType::f32: return "float32";
  case DType::f64: return "float64";
  case DType::i64: return "int64";
  case DType::bool8: return "bool";
  }
  return "?";
}

std::size_t dtype_size(DType d) {
  switch (d) {
  case DType::f32: return 4;
  case DType::f64: return 8;
  case DType::i64: return 8;
  case DType::bool8: return 1;
  }
  return 0;
}

} // namespace headgrad
