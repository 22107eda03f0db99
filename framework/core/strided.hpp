// strided.hpp - walking strided N-d tensors in row-major logical order: the one strided index loop
// of the project (copies, broadcasting, gradient sums, batched gemm offsets), and the sum of a
// tensor into a buffer of its shape or of a shape broadcast to it (Node::add_to_grad, sum_to).
//
// The innermost dimension is handed to the callback as a plain run (its length and each
// operand's stride along it), so the callback's loop can vectorise; outer dimensions advance an
// index counter (no per-element division).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "framework/core/broadcast.hpp"
#include "framework/core/dims.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad::book {

// Calls f(offsets, n, inner_strides) once per innermost row of `shape`: offsets[k] is the element
// offset of the row's first element in operand k (laid out with strides st[k]), n the row's
// length, inner_strides[k] operand k's stride along it. A 0-d shape is one row of length 1.
template <std::size_t N, typename F>
void for_each_row(const Dims& shape, const std::array<Dims, N>& st, F&& f) {
  const int r = shape.size();
  std::array<std::int64_t, N> off{};
  std::array<std::int64_t, N> inner{};
  if (shape.numel() == 0) return;
  if (r == 0) {
    f(off, std::int64_t{1}, inner);
    return;
  }
  for (std::size_t k = 0; k < N; ++k) inner[k] = st[k][r - 1];
  const std::int64_t n = shape[r - 1];
  const std::int64_t rows = shape.numel() / n;
  std::int64_t idx[kMaxDims] = {};
  for (std::int64_t row = 0; row < rows; ++row) {
    f(off, n, inner);
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        for (std::size_t k = 0; k < N; ++k) off[k] += st[k][d];
        break;
      }
      for (std::size_t k = 0; k < N; ++k) off[k] -= st[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// True when strides s1 and s2 address a tensor of `shape` identically (a size-1 axis's stride
// never matters): e.g. a layout is contiguous iff it is the same as contiguous_strides(shape).
inline bool same_layout(const Dims& shape, const Dims& s1, const Dims& s2) {
  for (int d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && s1[d] != s2[d]) return false;
  return true;
}

// Reorders the axes of `shape` (and the same axes of every stride list) so that operand `lead`
// is walked in its memory order: its strides decreasing, its unit stride innermost. A copy of a
// permuted view then reads its source contiguously and scatters into the destination - measured
// faster than gathering for attention's head permutes and K^T. The logical result is the same.
template <std::size_t N> void order_by_memory(Dims& shape, std::array<Dims, N>& st, std::size_t lead) {
  const int r = shape.size();
  for (int i = 1; i < r; ++i) // insertion sort, stable: equal strides keep their logical order
    for (int j = i; j > 0 && st[lead][j - 1] < st[lead][j]; --j) {
      std::swap(shape[j - 1], shape[j]);
      for (auto& s : st) std::swap(s[j - 1], s[j]);
    }
}

// static_cast<D>(s), defined for every s: a float that is NaN or outside int64's range gives
// INT64_MIN, what x86's conversion instruction (and so PyTorch on x86) gives, where a plain cast
// would be undefined behaviour.
template <typename D, typename S> inline D convert_value(S s) {
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D> && !std::is_same_v<D, bool>) {
    constexpr S lo = static_cast<S>(std::numeric_limits<D>::min()); // -2^63, exact in float and double
    if (!(s >= lo && s < -lo)) return std::numeric_limits<D>::min();
  }
  return static_cast<D>(s);
}

// dst = convert(src), element by element, both strided (`shape` is their common logical shape).
template <typename D, typename S>
void copy_strided(D* dst, const Dims& dst_strides, const S* src, const Dims& src_strides, const Dims& shape) {
  for_each_row<2>(shape, std::array<Dims, 2>{dst_strides, src_strides},
                  [&](const auto& o, std::int64_t n, const auto& in) {
                    D* d = dst + o[0];
                    const S* s = src + o[1];
                    if (in[0] == 1 && in[1] == 1)
                      for (std::int64_t i = 0; i < n; ++i) d[i] = convert_value<D>(s[i]);
                    else
                      for (std::int64_t i = 0; i < n; ++i) d[i * in[0]] = convert_value<D>(s[i * in[1]]);
                  });
}

// dst (contiguous, shape) = convert(src (strided)).
template <typename D, typename S> void copy_strided(D* dst, const S* src, const Dims& shape, const Dims& src_strides) {
  copy_strided(dst, contiguous_strides(shape), src, src_strides, shape);
}

// dst (contiguous, dst_shape) += scale * src summed over the axes along which dst_shape was
// broadcast to src_shape (src_shape = broadcast(dst_shape, ...)); with first_write, dst is
// uninitialised and is written instead (=).
//   same shape, src contiguous : one flat loop (over the threads when large). dst may be src
//                                itself (x + x hands dy to x, then adds dy again): no __restrict.
//   same shape, src strided    : walks src in its memory order (a permute's gradient: read
//                                contiguously, scatter into dst).
//   broadcast                  : dst is zeroed on a first write, then every src element is added
//                                to the dst element it was broadcast from, in src's logical order.
template <typename T>
void sum_into(T* dst, bool first_write, const Dims& dst_shape, const T* src, const Dims& src_shape,
              const Dims& src_strides, T scale) {
  if (dst_shape == src_shape && same_layout(src_shape, src_strides, contiguous_strides(src_shape))) {
    kernels::parallel_for(src_shape.numel(), 1, [=](std::int64_t b, std::int64_t e) {
      if (first_write)
        for (std::int64_t i = b; i < e; ++i) dst[i] = scale * src[i];
      else
        for (std::int64_t i = b; i < e; ++i) dst[i] += scale * src[i];
    });
    return;
  }
  if (dst_shape == src_shape) {
    Dims shape = src_shape;
    std::array<Dims, 2> st{contiguous_strides(dst_shape), src_strides};
    order_by_memory(shape, st, 1);
    for_each_row<2>(shape, st, [&](const auto& o, std::int64_t m, const auto& in) {
      T* d = dst + o[0];
      const T* s = src + o[1];
      if (in[0] == 1 && in[1] == 1 && first_write) // unit strides: loops that vectorise
        for (std::int64_t i = 0; i < m; ++i) d[i] = scale * s[i];
      else if (in[0] == 1 && in[1] == 1)
        for (std::int64_t i = 0; i < m; ++i) d[i] += scale * s[i];
      else if (first_write)
        for (std::int64_t i = 0; i < m; ++i) d[i * in[0]] = scale * s[i * in[1]];
      else
        for (std::int64_t i = 0; i < m; ++i) d[i * in[0]] += scale * s[i * in[1]];
    });
    return;
  }
  if (first_write) std::fill(dst, dst + dst_shape.numel(), T(0));
  const std::array<Dims, 2> st{broadcast_strides(dst_shape, contiguous_strides(dst_shape), src_shape), src_strides};
  for_each_row<2>(src_shape, st, [&](const auto& o, std::int64_t m, const auto& in) {
    T* d = dst + o[0];
    const T* s = src + o[1];
    if (in[0] == 0) { // the whole row lands on one dst element
      T acc = 0;
      for (std::int64_t i = 0; i < m; ++i) acc += s[i * in[1]];
      d[0] += scale * acc;
    } else {
      for (std::int64_t i = 0; i < m; ++i) d[i * in[0]] += scale * s[i * in[1]];
    }
  });
}

} // namespace headgrad::book
