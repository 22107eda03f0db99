// accumulate.hpp - adding one tensor into a buffer of the same or a smaller (broadcast) shape:
// the kernel behind Node::add_to_grad (dx += dy, summed over broadcast axes) and sum_to.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>

#include "framework/core/broadcast.hpp"
#include "framework/engine/kernels/parallel.hpp"
#include "framework/engine/kernels/strided.hpp"

namespace headgrad::kernels {

// dst (contiguous, dst_shape) += scale * src summed over the axes along which dst_shape was
// broadcast to src_shape (src_shape = broadcast(dst_shape, ...)); with first_write, dst is
// uninitialised and is written instead (=).
//   same shape, src contiguous : one flat loop (threaded when large). dst may be src itself
//                                (x + x hands dy to x, then adds dy again): no __restrict here.
//   same shape, src strided    : walks src in its memory order (a permute's gradient: read
//                                contiguously, scatter into dst).
//   broadcast                  : dst is zeroed on a first write, then every src element is added
//                                to the dst element it was broadcast from, in src's logical order.
template <typename T>
void sum_into(T* dst, bool first_write, const Dims& dst_shape, const T* src, const Dims& src_shape,
              const Dims& src_strides, T scale) {
  const std::int64_t n = src_shape.numel();
  if (dst_shape == src_shape && same_layout(src_shape, src_strides, contiguous_strides(src_shape))) {
    if (first_write) {
#pragma omp parallel for schedule(static) if (worth_threads(n))
      for (std::int64_t i = 0; i < n; ++i) dst[i] = scale * src[i];
    } else {
#pragma omp parallel for schedule(static) if (worth_threads(n))
      for (std::int64_t i = 0; i < n; ++i) dst[i] += scale * src[i];
    }
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

} // namespace headgrad::kernels
