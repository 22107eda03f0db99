#include "framework/dims.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace headgrad {

std::string Dims::str() const { return fmt::format("[{}]", fmt::join(begin(), end(), ", ")); }

Dims contiguous_strides(const Dims& shape) {
  Dims s;
  s.resize(shape.size());
  std::int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

int wrap_axis(int axis, int rank, const char* op) {
  const int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw std::invalid_argument(fmt::format("{}: axis {} is out of range for a tensor of rank {}", op, axis, rank));
  return a;
}

} // namespace headgrad
