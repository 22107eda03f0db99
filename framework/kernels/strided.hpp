// strided.hpp - walking a strided N-d tensor in row-major logical order.
//
// Used by copies (contiguous(), to(dtype)), permute backward and broadcasting. The innermost
// dimension is a plain loop; outer dimensions advance an index counter (no per-element division).
#pragma once
#include <array>
#include <cstdint>

#include "framework/dims.hpp"

namespace headgrad::kernels {

// Calls f(offset_a, offset_b, n_inner, inner_stride_a, inner_stride_b) once per innermost row of
// the logical shape, with the element offsets of that row's first element in two strided tensors.
template <typename F>
void for_each_row2(const Dims& shape, const Dims& sa, const Dims& sb, F&& f) {
  const int r = shape.size();
  if (shape.numel() == 0) return;
  if (r == 0) { f(std::int64_t{0}, std::int64_t{0}, std::int64_t{1}, std::int64_t{0}, std::int64_t{0}); return; }
  const std::int64_t inner = shape[r - 1];
  std::int64_t idx[kMaxDims] = {};
  std::int64_t oa = 0, ob = 0;
  const std::int64_t rows = shape.numel() / inner;
  for (std::int64_t row = 0; row < rows; ++row) {
    f(oa, ob, inner, sa[r - 1], sb[r - 1]);
    // advance the outer index (dims r-2 .. 0)
    for (int d = r - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) { oa += sa[d]; ob += sb[d]; break; }
      oa -= sa[d] * (shape[d] - 1);
      ob -= sb[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// dst (contiguous, shape) = convert(src (strided))
template <typename D, typename S>
void copy_strided(D* dst, const S* src, const Dims& shape, const Dims& src_strides) {
  const Dims dst_strides = contiguous_strides(shape);
  for_each_row2(shape, dst_strides, src_strides,
                [&](std::int64_t od, std::int64_t os, std::int64_t n, std::int64_t, std::int64_t ss) {
                  D* d = dst + od;
                  const S* s = src + os;
                  if (ss == 1)
                    for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i]);
                  else
                    for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<D>(s[i * ss]);
                });
}

// dst (strided) += src (contiguous, shape): scatters a gradient back through a view.
// assign: dst is a fresh buffer, written with `=` instead.
template <typename T>
void add_into_strided(T* dst, const Dims& dst_strides, const T* src, const Dims& shape, bool assign = false) {
  const Dims src_strides = contiguous_strides(shape);
  for_each_row2(shape, dst_strides, src_strides,
                [&](std::int64_t od, std::int64_t os, std::int64_t n, std::int64_t sd, std::int64_t) {
                  T* d = dst + od;
                  const T* s = src + os;
                  // unit stride: loops the compiler vectorises (head permutes move rows of d_head)
                  if (assign && sd == 1)
                    for (std::int64_t i = 0; i < n; ++i) d[i] = s[i];
                  else if (assign)
                    for (std::int64_t i = 0; i < n; ++i) d[i * sd] = s[i];
                  else if (sd == 1)
                    for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
                  else
                    for (std::int64_t i = 0; i < n; ++i) d[i * sd] += s[i];
                });
}

// dst (contiguous, shape) += src (strided): gathers a gradient out of a strided view.
template <typename T>
void add_from_strided(T* dst, const T* src, const Dims& shape, const Dims& src_strides) {
  const Dims dst_strides = contiguous_strides(shape);
  for_each_row2(shape, dst_strides, src_strides,
                [&](std::int64_t od, std::int64_t os, std::int64_t n, std::int64_t, std::int64_t ss) {
                  T* d = dst + od;
                  const T* s = src + os;
                  if (ss == 1)
                    for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
                  else
                    for (std::int64_t i = 0; i < n; ++i) d[i] += s[i * ss];
                });
}

} // namespace headgrad::kernels

namespace headgrad::kernels {

// N-operand version of for_each_row2: f(offsets[N], n_inner, inner_strides[N]) per innermost row.
template <std::size_t N, typename F>
void for_each_row(const Dims& shape, const std::array<Dims, N>& st, F&& f) {
  const int r = shape.size();
  std::array<std::int64_t, N> off{};
  std::array<std::int64_t, N> inner{};
  if (shape.numel() == 0) return;
  if (r == 0) { f(off, std::int64_t{1}, inner); return; }
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

} // namespace headgrad::kernels
