// row_softmax.hpp - softmax over the rows of a (rows, cols) buffer: plain, length-masked and
// boolean-masked in one kernel pair. Outputs first (with a backward's
// first_write flag), then inputs, then sizes (llm.c's order).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "framework/engine/kernels/first_write.hpp"
#include "framework/engine/kernels/isa_namespace.hpp"
#include "framework/engine/kernels/parallel.hpp"
#include "framework/engine/kernels/vec_math.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// One row: yr[:] = softmax over the kept keys of xr, 0 elsewhere.
// Kept keys: j < len, and kr[j] != 0 (kr == nullptr: all).
// A row with no kept key (or only -inf ones) is all zeros (and later gets zero gradient): no NaN,
// no uniform row. A NaN or +inf among the kept logits makes the whole row NaN, masked keys
// included - PyTorch's softmax after masked_fill(-inf) - so that a NaN reaches the loss.
// Stability: subtract the max over the kept entries only, so a huge masked value cannot underflow
// the kept ones.
// Speed: the loops run over the kept prefix rounded up to whole lanes (kLanes), with the masked
// entries inside it read as -inf (exp(-inf) = 0 exactly): fixed-width loops that vectorise with no
// scalar remainder, and the same sums as over the kept entries alone (a zero changes no sum).
template <bool KeepMask, typename T>
inline void softmax_row_impl(T* yr, const T* xr, std::int64_t len, const std::uint8_t* kr, std::int64_t cols) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const std::int64_t n = std::min(cols, (len + kLanes - 1) / kLanes * kLanes);
  // x[j], or -inf where masked. The loads are unconditional (j < n <= cols stays in the row), so
  // the compiler selects instead of branching or masking a load.
  auto kept_x = [=](std::int64_t j) {
    const T v = xr[j];
    bool keep = j < len;
    if constexpr (KeepMask) keep = keep & (kr[j] != 0);
    return keep ? v : kNegInf;
  };
  const T m = max_lanes_fn<T>(n, kept_x);
  if (m == kNegInf) { // nothing kept (or all -inf; a NaN would have made m NaN)
    std::fill(yr, yr + cols, T(0));
    return;
  }
  // whole blocks of kLanes (fixed-length inner loops: one vector each), then the rest
  const std::int64_t nb = n / kLanes * kLanes;
  for (std::int64_t j0 = 0; j0 < nb; j0 += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) yr[j0 + l] = exp_any(kept_x(j0 + l) - m);
  for (std::int64_t j = nb; j < n; ++j) yr[j] = exp_any(kept_x(j) - m);
  const T inv = T(1) / sum_lanes(yr, n);
  for (std::int64_t j0 = 0; j0 < nb; j0 += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) yr[j0 + l] *= inv;
  for (std::int64_t j = nb; j < n; ++j) yr[j] *= inv;
  // masked keys past the kept prefix: 0, or NaN when the sum is (then every entry before is too)
  std::fill(yr + n, yr + cols, inv == inv ? T(0) : inv);
}

template <typename T>
inline void softmax_row(T* yr, const T* xr, std::int64_t len, const std::uint8_t* kr, std::int64_t cols) {
  if (kr) softmax_row_impl<true>(yr, xr, len, kr, cols);
  else softmax_row_impl<false>(yr, xr, len, kr, cols);
}

// One row for either float type. (The row code runs at the CPU's vector width: these kernels are
// built per instruction set, framework/engine/kernels/isa/.)
template <typename T>
inline void softmax_row_any(T* yr, const T* xr, std::int64_t len, const std::uint8_t* kr, std::int64_t cols) {
  softmax_row<T>(yr, xr, len, kr, cols);
}

// y[r, :] = softmax over the keys of row r that are kept; others 0.
// Kept keys: j < lens[r] (lens == nullptr: all), and keep[r*cols + j] != 0 (keep == nullptr: all).
template <typename T>
void softmax_forward(T* y, const T* x, const std::int64_t* lens, const std::uint8_t* keep, std::int64_t rows,
                     std::int64_t cols) {
#pragma omp parallel for schedule(static) if (worth_threads(rows * cols, 8))
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t len = lens ? std::min<std::int64_t>(lens[r], cols) : cols;
    const std::uint8_t* kr = keep ? keep + r * cols : nullptr;
    softmax_row_any<T>(y + r * cols, x + r * cols, len, kr, cols);
  }
}

// forward:  y_i = exp(x_i) / sum_j exp(x_j)          (over the kept j; y = 0 elsewhere)
// local:    dy_i/dx_k = y_i (delta_ik - y_k)
// VJP:      dx_k += y_k (dy_k - sum_i dy_i y_i)
// shapes:   x, y, dy, dx: (rows, cols); masked entries have y = 0, so dx = 0 there, and a row
//           with nothing kept gets dx = 0.
// first_write: dx is fresh (see GradBuffer in autograd.hpp): written with `=` instead of `+=`.
// One row of it. dr may be gr itself (each element is read before it is written).
template <typename T> inline void softmax_row_backward(T* dr, bool first_write, const T* gr, const T* yr, std::int64_t cols) {
  const T dot = dot_lanes(gr, yr, cols);
  if (first_write)
    for (std::int64_t j = 0; j < cols; ++j) dr[j] = yr[j] * (gr[j] - dot);
  else
    for (std::int64_t j = 0; j < cols; ++j) dr[j] += yr[j] * (gr[j] - dot);
}

// The same for a row of masked softmax (keys j < len with kr[j] != 0 kept, as in the forward): its
// masked keys get dx = 0 exactly, as PyTorch's masked_fill gives them. y = 0 there, so the formula
// gives 0 too unless the row's dot is NaN or infinite (a NaN row, or a NaN or infinity anywhere in
// dy, which PyTorch's dot carries to the kept keys too) - only such a row takes the masked loop.
// The dot runs over the whole row (that NaN); the rest over the kept prefix, past which y = 0.
template <typename T>
inline void softmax_row_backward(T* dr, bool first_write, const T* gr, const T* yr, std::int64_t cols,
                                 std::int64_t len, const std::uint8_t* kr) {
  if (len >= cols && !kr) return softmax_row_backward(dr, first_write, gr, yr, cols);
  const T dot = dot_lanes(gr, yr, cols);
  if (std::isfinite(dot)) {
    if (first_write) {
      for (std::int64_t j = 0; j < len; ++j) dr[j] = yr[j] * (gr[j] - dot);
      std::fill(dr + len, dr + cols, T(0));
    } else {
      for (std::int64_t j = 0; j < len; ++j) dr[j] += yr[j] * (gr[j] - dot);
    }
    return;
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    const T g = j < len && (!kr || kr[j]) ? yr[j] * (gr[j] - dot) : T(0);
    store_grad(dr[j], g, first_write);
  }
}

// dx for every row; lens and keep as in softmax_forward (both null: not masked).
template <typename T>
void softmax_backward(T* dx, bool first_write, const T* dy, const T* y, const std::int64_t* lens,
                      const std::uint8_t* keep, std::int64_t rows, std::int64_t cols) {
  if (!lens && !keep) {
#pragma omp parallel for schedule(static) if (worth_threads(rows * cols, 8))
    for (std::int64_t r = 0; r < rows; ++r)
      softmax_row_backward(dx + r * cols, first_write, dy + r * cols, y + r * cols, cols);
    return;
  }
#pragma omp parallel for schedule(static) if (worth_threads(rows * cols, 8))
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t len = lens ? std::min<std::int64_t>(lens[r], cols) : cols;
    softmax_row_backward(dx + r * cols, first_write, dy + r * cols, y + r * cols, cols, len,
                         keep ? keep + r * cols : nullptr);
  }
}

HEADGRAD_ISA_END

} // namespace headgrad::engine
