// layer_norm_rows.hpp - LayerNorm over the rows of a (rows, D) buffer, one loop over the rows each
// way (llm.c's layernorm_forward / layernorm_backward, with lane reductions and threads over rows).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <omp.h>
#include <vector>

#include "framework/engine/kernels/isa_namespace.hpp"
#include "framework/engine/kernels/parallel.hpp"
#include "framework/engine/kernels/vec_math.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// The mean and 1 / sqrt(var + eps) of a row of finite values whose sum or squared deviations
// overflow T (float32 from |x| ~ 1e19, float64 from 1e154): the same two passes over x / c, c a
// power of two near max |x| (the division is exact), then scaled back - var + eps is never formed
// (it may not fit in T where its root does). A row holding an infinity or NaN is left to the plain
// formulas, which give NaN there, as PyTorch does. Returns false for such a row.
template <typename T> bool scaled_row_stats(T& mean, T& rstd, const T* xr, std::int64_t D, T eps) {
  T a = 0;
  for (std::int64_t i = 0; i < D; ++i) a = std::max(a, std::abs(xr[i]));
  if (!std::isfinite(a) || a == T(0)) return false;
  int e = 0;
  std::frexp(a, &e);                    // a = f 2^e, f in [0.5, 1)
  const T c = std::ldexp(T(1), e - 1);  // 2^(e-1) <= a: x / c in (-2, 2), and c itself finite
  const T mu = sum_lanes_fn<T>(D, [xr, c](std::int64_t i) { return xr[i] / c; }) / static_cast<T>(D);
  const T vu = sum_lanes_fn<T>(D, [xr, c, mu](std::int64_t i) { return (xr[i] / c - mu) * (xr[i] / c - mu); }) /
               static_cast<T>(D);
  mean = mu * c;
  rstd = T(1) / std::hypot(c * std::sqrt(vu), std::sqrt(eps)); // 1 / sqrt(c^2 vu + eps), never formed
  return true;
}

// One row: yr = (xr - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) (biased variance, as
// torch.nn.LayerNorm; two passes: the mean, then the squared deviations from it); st = (mean,
// rstd), kept for the backward. A row whose sum or variance overflows takes scaled_row_stats
// (one check per row): the exact normalised row where PyTorch gives NaN. Exact while the row's
// spread max - min stays below T's largest value.
template <typename T>
inline void layer_norm_row(T* yr, T* st, const T* xr, const T* w, const T* b, std::int64_t D, T eps) {
  T mean = sum_lanes(xr, D) / static_cast<T>(D);
  const T var =
      sum_lanes_fn<T>(D, [xr, mean](std::int64_t i) { return (xr[i] - mean) * (xr[i] - mean); }) / static_cast<T>(D);
  T rstd = T(1) / std::sqrt(var + eps);
  if (!std::isfinite(var)) scaled_row_stats(mean, rstd, xr, D, eps); // (a NaN or inf mean makes var NaN too)
  for (std::int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
  st[0] = mean;
  st[1] = rstd;
}

// layer_norm_row over every row; stats (rows, 2).
template <typename T>
void layer_norm_forward(T* y, T* stats, const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t D, T eps) {
#pragma omp parallel for schedule(static) if (worth_threads(rows * D, 4))
  for (std::int64_t r = 0; r < rows; ++r) layer_norm_row(y + r * D, stats + 2 * r, x + r * D, w, b, D, eps);
}

// s = a + b, then layer_norm_forward of s (s kept: the backward's input), row by row while the
// row is in cache.
template <typename T>
void add_layer_norm_forward(T* y, T* s, T* stats, const T* a, const T* b, const T* w, const T* bias, std::int64_t rows,
                            std::int64_t D, T eps) {
#pragma omp parallel for schedule(static) if (worth_threads(rows * D, 5))
  for (std::int64_t r = 0; r < rows; ++r) {
    T* sr = s + r * D;
    for (std::int64_t i = 0; i < D; ++i) sr[i] = a[r * D + i] + b[r * D + i];
    layer_norm_row(y + r * D, stats + 2 * r, sr, w, bias, D, eps);
  }
}

// forward:  xhat = (x - mean) rstd;  y = xhat w + b             (per row, over D)
// VJP:      g = dy w;  dx = rstd (g - mean(g) - xhat mean(g xhat))
//           dw = sum_rows dy xhat;  db = sum_rows dy
// Any of dx, dw, db may be null (not needed); each has its first_write flag (see GradBuffer).
// Threads: rows are split statically; each thread sums its rows' dw and db into its own partial
// row, and the partials are added in thread order afterwards - deterministic for a given thread
// count, no atomics, one pass over x and dy.
template <typename T>
void layer_norm_backward(T* dx, bool dx_first, T* dw, bool dw_first, T* db, bool db_first, const T* dy, const T* x,
                         const T* w, const T* stats, std::int64_t rows, std::int64_t D) {
  const bool par = worth_threads(rows * D, 4) && omp_get_max_threads() > 1 && !omp_in_parallel();
  const int nthreads = par ? omp_get_max_threads() : 1;
  std::vector<T> parts(static_cast<std::size_t>((dw || db) ? 2 * nthreads * D : 0), T(0));
#pragma omp parallel num_threads(nthreads) if (par)
  {
    const int tid = omp_get_thread_num();
    T* pw = parts.empty() ? nullptr : parts.data() + static_cast<std::size_t>(2 * tid * D);
    T* pb = pw ? pw + D : nullptr;
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * D;
      const T* gr = dy + r * D;
      const T mean = stats[2 * r], rstd = stats[2 * r + 1];
      if (dw)
        for (std::int64_t i = 0; i < D; ++i) pw[i] += gr[i] * ((xr[i] - mean) * rstd);
      if (db)
        for (std::int64_t i = 0; i < D; ++i) pb[i] += gr[i];
      if (!dx) continue;
      // mean(g) and mean(g xhat), with g = dy w and xhat = (x - mean) rstd
      const T mg = sum_lanes_fn<T>(D, [gr, w](std::int64_t i) { return gr[i] * w[i]; }) / static_cast<T>(D);
      const T mgx = sum_lanes_fn<T>(D, [=](std::int64_t i) { return gr[i] * w[i] * ((xr[i] - mean) * rstd); }) /
                    static_cast<T>(D);
      T* dr = dx + r * D;
      if (dx_first)
        for (std::int64_t i = 0; i < D; ++i) dr[i] = rstd * (gr[i] * w[i] - mg - (xr[i] - mean) * rstd * mgx);
      else
        for (std::int64_t i = 0; i < D; ++i) dr[i] += rstd * (gr[i] * w[i] - mg - (xr[i] - mean) * rstd * mgx);
    }
  }
  if (dw && dw_first) std::fill(dw, dw + D, T(0));
  if (db && db_first) std::fill(db, db + D, T(0));
  for (int t = 0; t < nthreads && !parts.empty(); ++t) {
    const T* pw = parts.data() + static_cast<std::size_t>(2 * t * D);
    if (dw)
      for (std::int64_t i = 0; i < D; ++i) dw[i] += pw[i];
    if (db)
      for (std::int64_t i = 0; i < D; ++i) db[i] += pw[D + i];
  }
}

HEADGRAD_ISA_END

} // namespace headgrad::engine
