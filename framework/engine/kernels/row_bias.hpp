// row_bias.hpp - a bias added to every row of a (rows, cols) matrix, and its gradient: the column
// sums. Used by linear (y = x W^T + b, db = sum_rows dy) and linear_residual (y = res + x W^T + b).
#pragma once
#include <algorithm>
#include <cstdint>

#include "framework/engine/kernels/isa_namespace.hpp"
#include "framework/engine/kernels/parallel.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// y[r, :] = b for every row (linear's gemm then adds x W^T with beta 1).
template <typename T> void fill_rows(T* y, const T* b, std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static) if (worth_threads(rows * cols))
  for (std::int64_t r = 0; r < rows; ++r) std::copy(b, b + cols, y + r * cols);
}

// y[r, :] = res[r, :] + b for every row, or a copy of res when b is null (linear_residual's gemm
// then adds x W^T with beta 1, so the residual add needs no pass of its own).
template <typename T> void add_rows(T* y, const T* res, const T* b, std::int64_t rows, std::int64_t cols) {
#pragma omp parallel for schedule(static) if (worth_threads(rows * cols))
  for (std::int64_t r = 0; r < rows; ++r) {
    T* __restrict yr = y + r * cols;
    const T* __restrict rr = res + r * cols;
    if (b)
      for (std::int64_t c = 0; c < cols; ++c) yr[c] = rr[c] + b[c];
    else
      std::copy(rr, rr + cols, yr);
  }
}

// out[c] = or += sum_r x[r, c] (first_write: =). Threads take blocks of 64 columns, and each
// column is summed over the rows in order, so the result does not depend on the thread count.
template <typename T> void column_sums(T* out, bool first_write, const T* x, std::int64_t rows, std::int64_t cols) {
  if (first_write) std::fill(out, out + cols, T(0));
  constexpr std::int64_t kBlock = 64;
#pragma omp parallel for schedule(static) if (worth_threads(rows * cols))
  for (std::int64_t c0 = 0; c0 < cols; c0 += kBlock) {
    const std::int64_t c1 = std::min(cols, c0 + kBlock);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = c0; c < c1; ++c) out[c] += x[r * cols + c];
  }
}

HEADGRAD_ISA_END

} // namespace headgrad::engine
