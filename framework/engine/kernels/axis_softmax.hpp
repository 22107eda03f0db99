// axis_softmax.hpp - softmax, log-softmax and log-sum-exp along the middle axis of an
// (outer, len, inner) buffer: softmax over an axis that is not the last one (the last axis, inner
// = 1, is row_softmax.hpp's). The `inner` columns of one outer block are processed side by side,
// so every pass reads along memory; per-column state lives in small arrays.
//
// NaN and infinities follow the row kernels and PyTorch: a column holding NaN is NaN throughout, a
// column of all -inf is all 0 in softmax (PyTorch: NaN, a documented difference) and NaN in
// log-softmax, a +inf makes the column NaN.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "framework/engine/kernels/first_write.hpp"
#include "framework/engine/kernels/vec_math.hpp"

namespace headgrad::kernels {

namespace detail {
// m[i] = max_k x[k, i] over one (len, inner) block; -inf for len 0, and -inf only when the column
// holds no NaN (as max_lanes_fn: a -inf column is searched for a NaN, which then becomes m[i]). Any
// other m[i] may have skipped a NaN, which the column's sum of exp(x - m) carries.
template <typename T> void column_max(T* m, const T* x, std::int64_t len, std::int64_t inner) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  std::fill(m, m + inner, kNegInf);
  for (std::int64_t k = 0; k < len; ++k)
    for (std::int64_t i = 0; i < inner; ++i) m[i] = m[i] > x[k * inner + i] ? m[i] : x[k * inner + i];
  for (std::int64_t i = 0; i < inner; ++i)
    if (m[i] == kNegInf)
      for (std::int64_t k = 0; k < len; ++k)
        if (x[k * inner + i] != x[k * inner + i]) m[i] = x[k * inner + i];
}

// ls[i] = log sum_k exp(x[k, i] - m[i]) over one block.
template <typename T> void column_log_sum(T* ls, const T* x, const T* m, std::int64_t len, std::int64_t inner) {
  std::fill(ls, ls + inner, T(0));
  for (std::int64_t k = 0; k < len; ++k)
    for (std::int64_t i = 0; i < inner; ++i) ls[i] += std::exp(x[k * inner + i] - m[i]);
  for (std::int64_t i = 0; i < inner; ++i) ls[i] = std::log(ls[i]);
}
} // namespace detail

// y[o, :, i] = softmax of x[o, :, i]; an all -inf column gives zeros.
template <typename T> void softmax_axis_forward(T* y, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  std::vector<T> m(static_cast<std::size_t>(inner)), s(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * len * inner;
    T* yo = y + o * len * inner;
    detail::column_max(m.data(), xo, len, inner);
    std::fill(s.begin(), s.end(), T(0));
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) s[i] += (yo[k * inner + i] = exp_any(xo[k * inner + i] - m[i]));
    for (std::int64_t i = 0; i < inner; ++i) s[i] = T(1) / s[i];
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) // a column with nothing above -inf is 0 (its exps are NaN)
        yo[k * inner + i] = m[i] == kNegInf ? T(0) : yo[k * inner + i] * s[i];
  }
}

// forward:  y_k = exp(x_k) / sum_j exp(x_j)            (along the middle axis)
// VJP:      dx_k = or += y_k (dy_k - sum_j dy_j y_j)   (first_write: =)
template <typename T>
void softmax_axis_backward(T* dx, bool first_write, const T* dy, const T* y, std::int64_t outer, std::int64_t len,
                           std::int64_t inner) {
  std::vector<T> dot(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const std::int64_t base = o * len * inner;
    std::fill(dot.begin(), dot.end(), T(0));
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) dot[i] += dy[base + k * inner + i] * y[base + k * inner + i];
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t at = base + k * inner + i;
        const T g = y[at] * (dy[at] - dot[i]);
        store_grad(dx[at], g, first_write);
      }
  }
}

// lse[o, i] = log sum_k exp(x[o, k, i]). shift_infinite: the shift is the column max, or 0 where
// that max is infinite - PyTorch's logsumexp, which gives -inf for an all -inf column and +inf
// for one holding +inf. Without it, those columns give NaN.
template <typename T>
void logsumexp_axis(T* lse, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner, bool shift_infinite) {
  std::vector<T> m(static_cast<std::size_t>(inner)), ls(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * len * inner;
    detail::column_max(m.data(), xo, len, inner);
    if (shift_infinite)
      for (T& v : m) v = std::isinf(v) ? T(0) : v;
    detail::column_log_sum(ls.data(), xo, m.data(), len, inner);
    for (std::int64_t i = 0; i < inner; ++i) lse[o * inner + i] = m[i] + ls[i];
  }
}

// y[o, :, i] = (x[o, :, i] - m) - log sum_k exp(x[o, k, i] - m), m the column max: the row
// kernel's order (log_softmax_forward in row_softmax.hpp), which keeps the precision of large
// logits. Columns of all -inf, or holding +inf or NaN, are NaN, as in PyTorch.
template <typename T>
void log_softmax_axis_forward(T* y, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner) {
  std::vector<T> m(static_cast<std::size_t>(inner)), ls(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const std::int64_t base = o * len * inner;
    detail::column_max(m.data(), x + base, len, inner);
    detail::column_log_sum(ls.data(), x + base, m.data(), len, inner);
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) y[base + k * inner + i] = (x[base + k * inner + i] - m[i]) - ls[i];
  }
}

// forward:  y_k = x_k - log sum_j exp(x_j)
// VJP:      dx_k = or += dy_k - exp(y_k) sum_j dy_j
template <typename T>
void log_softmax_axis_backward(T* dx, bool first_write, const T* dy, const T* y, std::int64_t outer, std::int64_t len,
                               std::int64_t inner) {
  std::vector<T> s(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const std::int64_t base = o * len * inner;
    std::fill(s.begin(), s.end(), T(0));
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) s[i] += dy[base + k * inner + i];
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t at = base + k * inner + i;
        const T g = dy[at] - std::exp(y[at]) * s[i];
        store_grad(dx[at], g, first_write);
      }
  }
}

} // namespace headgrad::kernels
