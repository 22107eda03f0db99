// map.hpp - the loops of the elementwise ops: a unary function and its derivative over contiguous
// buffers, a binary function over broadcast operands, a unary function over a strided one. The ops
// (unary.cpp, elementwise.cpp, compare.cpp, where.cpp, linear.cpp) pass the math in as small
// functors. Large buffers are split over the threads (kernels::parallel_for): every element is
// computed on its own, so the split changes no bit. The pointers inside each loop are __restrict
// (the output never aliases an input there), which lets the compiler vectorise.
#pragma once
#include <array>
#include <cstdint>

#include "framework/core/strided.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad::book {

// y[i] = f(x[i]) for n contiguous elements.
template <typename T, typename F> void map(T* y, const T* x, std::int64_t n, const F& f) {
  kernels::parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
    T* __restrict yr = y;
    const T* __restrict xr = x;
    for (std::int64_t i = b; i < e; ++i) yr[i] = f(xr[i]);
  });
}

// x[i] = f(x[i]) in place.
template <typename T, typename F> void map_in_place(T* x, std::int64_t n, const F& f) {
  kernels::parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) x[i] = f(x[i]);
  });
}

// dx[i] = or += dy[i] * dfdx(x[i], y[i]) (first_write: =), the VJP of a unary op y = f(x). On a
// first write dx may be dy itself (Node::overwritable_dy: a fused activation's dz = dy * f'(z) in
// dy's buffer), never x or y; each case is a loop of its own.
template <typename T, typename F>
void map_backward(T* dx, bool first_write, const T* dy, const T* x, const T* y, std::int64_t n, const F& dfdx) {
  kernels::parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
    const T* __restrict xr = x;
    const T* __restrict yr = y;
    if (dx == dy) {
      T* __restrict d = dx;
      for (std::int64_t i = b; i < e; ++i) d[i] *= dfdx(xr[i], yr[i]);
      return;
    }
    T* __restrict d = dx;
    const T* __restrict g = dy;
    if (first_write)
      for (std::int64_t i = b; i < e; ++i) d[i] = g[i] * dfdx(xr[i], yr[i]);
    else
      for (std::int64_t i = b; i < e; ++i) d[i] += g[i] * dfdx(xr[i], yr[i]);
  });
}

// y = f(a, b) over `shape`, with a and b read through strides that broadcast them to it (0 on
// broadcast axes); y contiguous, of T or another type (a comparison writes bool). Same-layout
// contiguous operands take one flat loop.
template <typename T, typename F, typename Y>
void zip_broadcast(Y* y, const T* a, const Dims& sa, const T* b, const Dims& sb, const Dims& shape, const F& f) {
  const Dims sy = contiguous_strides(shape);
  if (same_layout(shape, sa, sy) && same_layout(shape, sb, sy)) {
    kernels::parallel_for(shape.numel(), 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t i = lo; i < hi; ++i) y[i] = f(a[i], b[i]);
    });
    return;
  }
  for_each_row<3>(shape, std::array<Dims, 3>{sy, sa, sb}, [&](const auto& o, std::int64_t n, const auto& in) {
    Y* yr = y + o[0];
    const T* ar = a + o[1];
    const T* br = b + o[2];
    if (in[1] == 1 && in[2] == 1)
      for (std::int64_t i = 0; i < n; ++i) yr[i] = f(ar[i], br[i]);
    else if (in[1] == 1 && in[2] == 0) // a row plus a broadcast scalar (a bias, a scale)
      for (std::int64_t i = 0; i < n; ++i) yr[i] = f(ar[i], br[0]);
    else
      for (std::int64_t i = 0; i < n; ++i) yr[i] = f(ar[i * in[1]], br[i * in[2]]);
  });
}

// y = cond ? a : b over `shape`, all three read through broadcast strides (0 on broadcast axes);
// y contiguous. cond is bool (one byte, 0 or 1).
template <typename T>
void where_broadcast(T* y, const bool* cond, const Dims& sc, const T* a, const Dims& sa, const T* b, const Dims& sb,
                     const Dims& shape) {
  for_each_row<4>(shape, std::array<Dims, 4>{contiguous_strides(shape), sc, sa, sb},
                  [&](const auto& o, std::int64_t n, const auto& in) {
                    for (std::int64_t i = 0; i < n; ++i)
                      y[o[0] + i] = cond[o[1] + i * in[1]] ? a[o[2] + i * in[2]] : b[o[3] + i * in[3]];
                  });
}

// y = f(x) for x of `shape` read through `x_strides` (a view), y contiguous.
template <typename T, typename F>
void map_strided(T* y, const T* x, const Dims& shape, const Dims& x_strides, const F& f) {
  if (same_layout(shape, x_strides, contiguous_strides(shape))) return map(y, x, shape.numel(), f);
  for_each_row<2>(shape, std::array<Dims, 2>{contiguous_strides(shape), x_strides},
                  [&](const auto& o, std::int64_t n, const auto& in) {
                    for (std::int64_t i = 0; i < n; ++i) y[o[0] + i] = f(x[o[1] + i * in[1]]);
                  });
}

} // namespace headgrad::book
