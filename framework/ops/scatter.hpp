// scatter.hpp - the backward of indexing: every gradient element goes back to the input element
// it was read from, and elements read several times receive the sum (scatter-add).
#pragma once
#include <algorithm>
#include <cstdint>

namespace headgrad::book {

// index_select along the middle axis of x (outer, len, inner): y[o, k, i] = x[o, index[k], i].
// Backward: dx[o, index[k], i] += dy[o, k, i]. first_write: dx is zeroed first (rows that no
// index picks get no gradient).
template <typename T>
void index_add(T* dx, bool first_write, const T* dy, const std::int64_t* index, std::int64_t outer, std::int64_t len,
               std::int64_t count, std::int64_t inner) {
  if (first_write) std::fill(dx, dx + outer * len * inner, T(0));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < count; ++k) {
      T* dr = dx + (o * len + index[k]) * inner;
      const T* gr = dy + (o * count + k) * inner;
      for (std::int64_t i = 0; i < inner; ++i) dr[i] += gr[i];
    }
}

// gather along the middle axis: y[o, k, i] = x[o, index[o, k, i], i] (index and y: (outer,
// count, inner)). Backward: dx[o, index[o, k, i], i] += dy[o, k, i]; max's gradient is the
// count = 1 case with the argmax as index. first_write: dx is zeroed first.
template <typename T>
void gather_add(T* dx, bool first_write, const T* dy, const std::int64_t* index, std::int64_t outer, std::int64_t len,
                std::int64_t count, std::int64_t inner) {
  if (first_write) std::fill(dx, dx + outer * len * inner, T(0));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < count; ++k)
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t at = (o * count + k) * inner + i;
        dx[(o * len + index[at]) * inner + i] += dy[at];
      }
}

} // namespace headgrad::book
