#include "framework/core/broadcast.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad {

Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op) {
  const int r = std::max(a.size(), b.size());
  Dims out;
  out.resize(r);
  for (int i = 0; i < r; ++i) {
    const std::int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(fmt::format("{}: shapes {} and {} cannot be broadcast", op, a.str(), b.str()));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Dims broadcast_strides(const Dims& shape, const Dims& strides, const Dims& out) {
  const int r = out.size();
  Dims s;
  s.resize(r);
  for (int i = 0; i < r; ++i) {
    const int j = i - (r - shape.size());
    s[i] = (j < 0 || shape[j] == 1) ? 0 : strides[j];
  }
  return s;
}

} // namespace headgrad
