// arg_reduce.hpp - the extreme value along one axis and where it is (max, min, argmax, argmin), and
// the k largest or smallest (topk). The axis is the middle one of an (outer, len, inner) layout.
//
// NaN, as torch.max / torch.topk: a NaN is larger (and, for min, smaller) than every number, so a
// row holding one reports NaN and the index of its first NaN. Ties go to the first index (what
// PyTorch's CPU kernels return).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

namespace headgrad::kernels {

// true when v should replace the current best c (max: v > c; min: v < c), NaN winning over numbers.
template <bool Max, typename T> inline bool replaces(T v, T c) {
  if (c != c) return false; // the first NaN stays
  if (v != v) return true;
  return Max ? v > c : v < c;
}

// For every (o, i): value[o, i] = the max (Max) or min of x[o, :, i] and index[o, i] its position.
// x: (outer, len, inner) contiguous, len >= 1; value (nullable) and index: (outer, inner).
// The inner positions are updated side by side so the reads run along memory.
template <bool Max, typename T>
void arg_reduce(T* value, std::int64_t* index, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner) {
  const std::unique_ptr<T[]> best(new T[static_cast<std::size_t>(inner)]); // not vector<T>: T may be bool
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * len * inner;
    std::int64_t* io = index + o * inner;
    std::copy(xo, xo + inner, best.get());
    std::fill(io, io + inner, std::int64_t{0});
    for (std::int64_t k = 1; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) {
        const T v = xo[k * inner + i];
        if (replaces<Max>(v, best[i])) {
          best[i] = v;
          io[i] = k;
        }
      }
    if (value) std::copy(best.get(), best.get() + inner, value + o * inner);
  }
}

// The k largest (Largest) or smallest entries of every x[o, :, i], best first: value and index
// (outer, k, inner). Order: NaN first for largest (last, so never chosen before a number, for
// smallest), then by value, ties by the lower index. k <= len.
template <bool Largest, typename T>
void topk(T* value, std::int64_t* index, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner,
          std::int64_t k) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(len));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const T* col = x + o * len * inner + i; // col[j * inner] = x[o, j, i]
      auto before = [col, inner](std::int64_t a, std::int64_t b) {
        const T va = col[a * inner], vb = col[b * inner];
        const bool na = va != va, nb = vb != vb;
        if (na || nb) return na != nb ? (Largest ? na : nb) : a < b; // NaN ranks as the largest value
        if (va != vb) return Largest ? va > vb : va < vb;
        return a < b;
      };
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t at = (o * k + j) * inner + i;
        index[at] = order[static_cast<std::size_t>(j)];
        value[at] = col[index[at] * inner];
      }
    }
}

} // namespace headgrad::kernels
