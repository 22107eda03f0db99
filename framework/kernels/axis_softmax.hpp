// axis_softmax.hpp - softmax, log-softmax and log-sum-exp along the middle axis of an
// (outer, len, inner) buffer: softmax over an axis that is not the last one (the last axis, inner
// = 1, is row_softmax.hpp's). The `inner` columns of one outer block are processed side by side,
// so every pass reads along memory; per-column state lives in small arrays.
//
// NaN and infinities follow the row kernels: a column holding NaN is NaN throughout, a column of
// all -inf is all 0 in softmax (and NaN in log-softmax, as in PyTorch), a +inf makes the column NaN.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "framework/kernels/vec_math.hpp"

namespace headgrad::kernels {

namespace detail {
// m[i] = max_k x[k, i] over one (len, inner) block; -inf for len 0.
template <typename T> void column_max(T* m, const T* x, std::int64_t len, std::int64_t inner) {
  std::fill(m, m + inner, -std::numeric_limits<T>::infinity());
  for (std::int64_t k = 0; k < len; ++k)
    for (std::int64_t i = 0; i < inner; ++i) m[i] = m[i] > x[k * inner + i] ? m[i] : x[k * inner + i];
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
        dx[at] = first_write ? g : dx[at] + g;
      }
  }
}

// lse[o, i] = log sum_k exp(x[o, k, i]). shift_infinite: the shift is the column max, or 0 where
// that max is infinite - PyTorch's logsumexp, which gives -inf for an all -inf column and +inf
// for one holding +inf. Without it (log-softmax), those columns give NaN, as PyTorch's
// log_softmax does.
template <typename T>
void logsumexp_axis(T* lse, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner, bool shift_infinite) {
  std::vector<T> m(static_cast<std::size_t>(inner)), s(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * len * inner;
    detail::column_max(m.data(), xo, len, inner);
    if (shift_infinite)
      for (T& v : m) v = std::isinf(v) ? T(0) : v;
    std::fill(s.begin(), s.end(), T(0));
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) s[i] += std::exp(xo[k * inner + i] - m[i]);
    for (std::int64_t i = 0; i < inner; ++i) lse[o * inner + i] = m[i] + std::log(s[i]);
  }
}

// y[o, :, i] = x[o, :, i] - log sum_k exp(x[o, k, i])
template <typename T>
void log_softmax_axis_forward(T* y, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner) {
  std::vector<T> lse(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const std::int64_t base = o * len * inner;
    logsumexp_axis(lse.data(), x + base, 1, len, inner, /*shift_infinite=*/false);
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t i = 0; i < inner; ++i) y[base + k * inner + i] = x[base + k * inner + i] - lse[i];
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
        dx[at] = first_write ? g : dx[at] + g;
      }
  }
}

} // namespace headgrad::kernels
