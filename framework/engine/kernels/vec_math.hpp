// vec_math.hpp - loops the compiler can vectorise without -ffast-math: row reductions with
// several independent accumulators, and a branch-free float exp.
//
// Why: under strict IEEE semantics GCC must add a row's elements in source order, so
// `for (j) s += x[j]` is one dependent add per element (4 cycles each) and never uses SIMD.
// Writing the reduction over kLanes independent partial sums fixes the order ourselves - a
// different, equally valid order (pairwise-like, if anything more accurate) that the compiler
// may then map onto vector registers. std::exp is a library call per element; exp_f32 below is
// inline arithmetic, so a loop over it vectorises too.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// One vector register of floats: 16 where the copy is built for AVX-512 (framework/engine/kernels/isa/),
// else 8 (one AVX register, two SSE ones). With 8 lanes GCC maps AVX-512 code onto masked and
// permuted partial vectors: layer norm over rows of 128 ran 2x slower than at 16.
#if defined(__AVX512F__)
inline constexpr std::int64_t kLanes = 16;
#else
inline constexpr std::int64_t kLanes = 8;
#endif

// sum_j f(j) for j in [0, n), accumulated in kLanes interleaved partial sums, then combined
// pairwise. f must be cheap and inlinable (a lambda over array reads).
template <typename T, typename F> inline T sum_lanes_fn(std::int64_t n, F&& f) {
  T acc[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) acc[l] += f(j + l);
  for (std::int64_t l = 0; j < n; ++j, ++l) acc[l] += f(j);
  for (std::int64_t w = kLanes / 2; w > 0; w /= 2)
    for (std::int64_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

template <typename T> inline T sum_lanes(const T* x, std::int64_t n) {
  return sum_lanes_fn<T>(n, [x](std::int64_t j) { return x[j]; });
}

template <typename T> inline T dot_lanes(const T* x, const T* y, std::int64_t n) {
  return sum_lanes_fn<T>(n, [x, y](std::int64_t j) { return x[j] * y[j]; });
}

// sum_i x[i]^2 in double, over kLanes partial sums: the gradient norm's (optim::clip_grad_norm;
// built once, outside the copies, so that its order of additions is the same on every CPU).
template <typename T> inline double square_sum(const T* x, std::int64_t n) {
  return sum_lanes_fn<double>(n, [x](std::int64_t i) { return static_cast<double>(x[i]) * static_cast<double>(x[i]); });
}

// max(a, b) that keeps a NaN from either side, as torch.max does: a NaN in a stays, a NaN in b is
// taken. (A plain `a > b ? a : b` returns b when a is NaN, dropping an earlier NaN.) For combining
// a few running maxima; the per-element loop below uses the plain select, which GCC turns into one
// maxss per element where this one costs a compare and a branch.
template <typename T> inline T max_nan(T a, T b) { return (a > b || a != a) ? a : b; }

// max_j f(j) for j in [0, n) (exact in any order); -inf for n == 0, and -inf only when no f(j) is
// NaN: a result of -inf is checked by a second pass for a NaN among the f(j) (rare: a row that is
// all -inf or masked), so a softmax row holding a NaN is never taken as empty. Any other result is
// NaN or may be the max of the non-NaN f(j); a caller that goes on to sum exp(f(j) - max) gets NaN
// either way, as it should.
template <typename T, typename F> inline T max_lanes_fn(std::int64_t n, F&& f) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T acc[kLanes];
  std::fill(acc, acc + kLanes, kNegInf);
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const T v = f(j + l);
      acc[l] = acc[l] > v ? acc[l] : v;
    }
  for (std::int64_t l = 0; j < n; ++j, ++l) {
    const T v = f(j);
    acc[l] = acc[l] > v ? acc[l] : v;
  }
  for (std::int64_t w = kLanes / 2; w > 0; w /= 2)
    for (std::int64_t l = 0; l < w; ++l) acc[l] = acc[l] > acc[l + w] ? acc[l] : acc[l + w];
  if (acc[0] == kNegInf)
    for (std::int64_t k = 0; k < n; ++k)
      if (const T v = f(k); v != v) return v;
  return acc[0];
}

template <typename T> inline T max_lanes(const T* x, std::int64_t n) {
  return max_lanes_fn<T>(n, [x](std::int64_t j) { return x[j]; });
}

// exp_f32's constants and its polynomial, on a float or on a vector of floats (GCC vector types;
// attention_rows.cpp runs the same steps lane-wise).
struct ExpF32 {
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f; // ln 2 = hi + lo, hi exact in 9 bits
  static constexpr float kMax = 88.7228394f, kMin = -87.3365479f;
  static constexpr float kShift = 12582912.0f; // 1.5 * 2^23: t + kShift rounds t to an integer
  // exp(r) for |r| <= ln2/2: Cephes' degree-6 polynomial (expf's coefficients)
  template <typename V> static V reduced(V r) {
    V p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return p * (r * r) + r + 1.0f;
  }
};

// exp(x) for float, branch-free: x = n ln2 + r with |r| <= ln2/2, exp(r) by the polynomial above,
// times 2^n assembled in the exponent bits. Relative error <= 2 ulp over the range; x < -87.3
// gives 0 (smallest normal, flushed), x > 88.7 gives +inf, NaN gives NaN. Tests compare it with
// std::exp over the whole float range.
inline float exp_f32(float x) {
  using E = ExpF32;
  const bool is_nan = x != x;
  const bool over = x > E::kMax, under = x < E::kMin;
  const float xc = std::min(std::max(x, E::kMin), E::kMax);
  // n = round(x log2 e): adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits
  const float t = xc * E::kLog2e + E::kShift;
  const float n = t - E::kShift;
  const std::int32_t ni = std::bit_cast<std::int32_t>(t) - std::bit_cast<std::int32_t>(E::kShift);
  const float r = (xc - n * E::kLn2Hi) - n * E::kLn2Lo;
  const float er = E::reduced(r);
  // 2^n for n in [-126, 128]: n = 128 only when x is at kMax, split as 2^(n-1) * 2 to stay finite
  const std::int32_t half = ni >> 1;
  const float s1 = std::bit_cast<float>((half + 127) << 23);
  const float s2 = std::bit_cast<float>((ni - half + 127) << 23);
  float y = er * s1 * s2;
  y = under ? 0.0f : y;
  y = over ? std::numeric_limits<float>::infinity() : y;
  return is_nan ? x : y;
}

// exp for either float type: the inline float version, std::exp for double (the float64
// gradient checks keep libm's exp).
template <typename T> inline T exp_any(T x) {
  if constexpr (sizeof(T) == 4) return exp_f32(x);
  else return std::exp(x);
}

HEADGRAD_ISA_END
} // namespace headgrad::engine
