// vector_math_isa.cpp - transcendental math and GELU at one instruction set's vector width. This
// file is compiled once per instruction set (CMakeLists.txt: HEADGRAD_ISA_NS names the namespace,
// -march the instructions), so each copy uses the widest vectors its target has:
//   avx512: 16 floats / 8 doubles (__m512, SLEEF's *_avx512f functions)
//   avx2:    8 floats / 4 doubles (__m256, SLEEF's *_avx2 functions)
//   baseline x86-64: 4 / 2 (__m128, SLEEF's *_sse2 functions); other processors: one at a time
// The vectors are GCC vector types (https://gcc.gnu.org/onlinedocs/gcc/Vector-Extensions.html):
// + - * / and ?: work on them element by element, so one loop body serves every width.
//
// Only what is defined in this file's own namespace may be compiled here: an inline function of
// another namespace would be compiled with this copy's instructions too, and the linker keeps one
// copy of it for the whole program (the isa_symbols test checks the objects for that).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <sleef.h>

#include "framework/engine/kernels/parallel.hpp"
#include "framework/engine/kernels/vector_math.hpp"

#ifndef HEADGRAD_ISA_NS
#error "HEADGRAD_ISA_NS names this copy's namespace (set by CMakeLists.txt)"
#endif

namespace headgrad::engine::HEADGRAD_ISA_NS {
namespace {

// ---- one vector of floats or doubles, and SLEEF's functions on it ------------------------------
// SLEEF names a function by its element type and width and the instructions it uses:
// Sleef_expf16_u10avx512f is exp of 16 floats within 1 ulp with AVX-512F, Sleef_expd8_u10avx512f
// of 8 doubles; the scalar ones have no width (Sleef_expf_u10, Sleef_exp_u10).
#define HEADGRAD_SLEEF_FUNCTIONS(F, D, ISA)                      \
  VF vexp(VF v) { return Sleef_exp##F##_u10##ISA(v); }           \
  VF vlog(VF v) { return Sleef_log##F##_u10##ISA(v); }           \
  VF vtanh(VF v) { return Sleef_tanh##F##_u10##ISA(v); }         \
  VD vexp(VD v) { return Sleef_exp##D##_u10##ISA(v); }           \
  VD vlog(VD v) { return Sleef_log##D##_u10##ISA(v); }           \
  VD vtanh(VD v) { return Sleef_tanh##D##_u10##ISA(v); }         \
  VD verf(VD v) { return Sleef_erf##D##_u10##ISA(v); }
#if defined(__AVX512F__)
using VF = __m512;
using VD = __m512d;
HEADGRAD_SLEEF_FUNCTIONS(f16, d8, avx512f)
#elif defined(__AVX2__)
using VF = __m256;
using VD = __m256d;
HEADGRAD_SLEEF_FUNCTIONS(f8, d4, avx2)
#elif defined(__SSE2__)
using VF = __m128;
using VD = __m128d;
HEADGRAD_SLEEF_FUNCTIONS(f4, d2, sse2)
#else
using VF = float;
using VD = double;
HEADGRAD_SLEEF_FUNCTIONS(f, , )
#endif
#undef HEADGRAD_SLEEF_FUNCTIONS

// a * b + c in one rounding where the copy's instructions have an FMA (x86-64-v3 and v4), else
// in two. Written out, since this file is built with -ffp-contract=off (CMakeLists.txt): only the
// kernels that ask for FMAs get them.
#if defined(__AVX512F__)
VF fmadd(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
#elif defined(__AVX2__) && defined(__FMA__)
VF fmadd(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
#else
VF fmadd(VF a, VF b, VF c) { return a * b + c; }
#endif
VF splat(float x) { return VF{} + x; } // x in every lane

// The bits of a float vector as unsigned integers of the same width, and back.
#if defined(__SSE2__)
using VU = std::uint32_t __attribute__((vector_size(sizeof(VF))));
#else
using VU = std::uint32_t;
#endif
VU bits(VF v) { return std::bit_cast<VU>(v); }
VF from_bits(VU u) { return std::bit_cast<VF>(u); }

template <typename T> struct VecOf;
template <> struct VecOf<float> { using type = VF; };
template <> struct VecOf<double> { using type = VD; };
template <typename T> using Vec = typename VecOf<T>::type;
template <typename T> constexpr std::int64_t kWidth = static_cast<std::int64_t>(sizeof(Vec<T>) / sizeof(T));

template <typename T> Vec<T> load(const T* p) {
  Vec<T> v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <typename T> void store(T* p, Vec<T> v) { __builtin_memcpy(p, &v, sizeof v); }

// y[i] = f(x[i]) for i < n, f on whole vectors: full vectors, then the last partial one through
// a zero-padded copy (the padding's results are dropped).
template <typename T, typename F> void map_vectors(T* y, const T* x, std::int64_t n, F f) {
  constexpr std::int64_t W = kWidth<T>;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) store(y + i, f(load(x + i)));
  if (i < n) {
    T in[W] = {}, out[W];
    __builtin_memcpy(in, x + i, static_cast<std::size_t>(n - i) * sizeof(T));
    store(out, f(load(in)));
    __builtin_memcpy(y + i, out, static_cast<std::size_t>(n - i) * sizeof(T));
  }
}


// ---- GELU (Hendrycks & Gimpel 2016), the arithmetic of PyTorch's CPU kernel -----------------------
// (aten/src/ATen/native/cpu/Activation.cpp, GeluKernelImpl / GeluBackwardKernelImpl)
constexpr double kSqrt1_2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi): phi(0)
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2/pi)
constexpr double kKappa = 0.044715;

#if defined(__AVX2__) && defined(__FMA__)
// exp(x) for float x <= 0, inline in the copies with FMAs (AVX2, AVX-512): SLEEF's vector exp is
// a call, around which every live vector register is saved and restored (all of them are
// caller-saved in the x86-64 ABI). The algorithm of Cephes' expf (Moshier,
// http://www.netlib.org/cephes/, single/expf.c): x = n ln2 + r with n = round(x log2 e) and
// |r| <= ln2/2, exp(r) by its degree-6 polynomial, times 2^n assembled in the exponent bits
// (kernels::exp_f32 in vec_math.hpp is its scalar form). Within 1 ulp of exp over [-87.3, 0]:
// 0.71 ulp at worst over every 7th float there. Below -87.34, where exp falls under the smallest
// normal float, it gives 0; NaN gives NaN. (x > 0 up to 88 would work too, but GELU needs only
// exp(-u^2/2).)
VF exp_neg(VF x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f; // ln 2 = hi + lo, hi exact in 9 bits
  constexpr float kMin = -87.3365479f;                              // ln(2^-126)
  const VF xc = x < kMin ? splat(kMin) : x;                        // a NaN compares false and stays
  // m = 1.5 * 2^23 + 127 + round(x log2 e): adding 1.5 * 2^23 rounds to an integer, kept in the low
  // mantissa bits, so m's bits shifted left by 23 are n + 127 (in [1, 127]) in the exponent field:
  // the float 2^n
  constexpr float kShift = 12582912.0f + 127.0f;
  const VF m = fmadd(xc, splat(kLog2e), splat(kShift));
  const VF n = m - kShift;
  const VF r = fmadd(n, splat(-kLn2Lo), fmadd(n, splat(-kLn2Hi), xc)); // x - n ln2
  VF p = fmadd(r, splat(1.9875691500e-4f), splat(1.3981999507e-3f));
  p = fmadd(p, r, splat(8.3334519073e-3f));
  p = fmadd(p, r, splat(4.1665795894e-2f));
  p = fmadd(p, r, splat(1.6666665459e-1f));
  p = fmadd(p, r, splat(5.0000001201e-1f));
  const VF exp_r = fmadd(p, r * r, r) + 1.0f;
  const VF y = exp_r * from_bits(bits(m) << 23);
  return x < kMin ? splat(0.0f) : y;
}
#else
// The baseline copy keeps SLEEF's exp: its SSE2 selects cost three instructions each, and the
// inline one above measured 14% slower there (GELU over 384 x 512 floats 0.54 vs 0.48 ms).
VF exp_neg(VF x) { return vexp(x); }
#endif

// erf form, float: y = u/2 (1 + erf(u/sqrt 2)), dy/du = Phi(u) + u phi(u). erf(a) by Abramowitz &
// Stegun 7.1.26 with the operations of PyTorch's Vectorized<float>::erf (FMAs, the sign put back by
// its bit; absolute error <= 1.5e-7, and 5e-7 in float arithmetic): with t = 1 / (1 + p |a|),
//   erf(a) = sign(a) (1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) exp(-a^2))
// and exp(-a^2) = exp(-u^2 / 2) is also phi's exponential, so the derivative costs no second exp.
// Measured against SLEEF's 1-ulp erf (Sleef_erff16_u10avx512f) over 393,216 floats, the erf alone:
// 0.19 vs 0.74 ms (AVX-512), 0.29 vs 1.29 ms (AVX2). With the exp inline (exp_neg) and FMAs, y
// and dy/du over a 384 x 512 block with a bias: 0.099 vs 0.149 ms (AVX-512), 0.155 vs 0.239 ms
// (AVX2) with SLEEF's exp and separate multiplies and adds, at the same error against a
// long-double reference (2e-7). A reciprocal estimate and a Newton step in place of the division
// measured no faster.
Vec<float> gelu_erf_f32(Vec<float> u, Vec<float>* dydu) {
  const VF a = u * static_cast<float>(kSqrt1_2);
  const VU sign = bits(a) & 0x80000000u;
  const VF abs_a = from_bits(bits(a) & 0x7fffffffu);
  const VF t = 1.0f / fmadd(abs_a, splat(0.3275911f), splat(1.0f));
  VF r = fmadd(t, splat(1.061405429f), splat(-1.453152027f));
  r = fmadd(r, t, splat(1.421413741f));
  r = fmadd(r, t, splat(-0.284496736f));
  r = fmadd(r, t, splat(0.254829592f));
  const VF e = exp_neg(-(a * a));
  const VF erf = from_bits(bits(fmadd(-e * t, r, splat(1.0f))) ^ sign); // sign(a) (1 - r t e)
  if (dydu) *dydu = fmadd(u, e * static_cast<float>(kInvSqrt2Pi), (erf + 1.0f) * 0.5f);
  return u * 0.5f * (erf + 1.0f);
}

// erf form, double: SLEEF's 1-ulp erf and exp (PyTorch's Vectorized<double> calls the same).
Vec<double> gelu_erf_f64(Vec<double> u, Vec<double>* dydu) {
  const Vec<double> erf = verf(u * kSqrt1_2);
  if (dydu) *dydu = (erf + 1.0) * 0.5 + u * (vexp(u * u * -0.5) * kInvSqrt2Pi);
  return u * 0.5 * (erf + 1.0);
}

// tanh form: y = u/2 (1 + tanh w), w = sqrt(2/pi) (u + 0.044715 u^3);
// dy/du = (1 + tanh w)/2 + u/2 (1 - tanh^2 w) sqrt(2/pi) (1 + 3 * 0.044715 u^2)
template <typename T> Vec<T> gelu_tanh(Vec<T> u, Vec<T>* dydu) {
  const T beta = static_cast<T>(kSqrt2OverPi), kappa = static_cast<T>(kKappa);
  const Vec<T> u2 = u * u;
  const Vec<T> th = vtanh((u + u2 * u * kappa) * beta);
  if (dydu) *dydu = (th + T(1)) * T(0.5) + u * T(0.5) * (T(1) - th * th) * beta * (u2 * (T(3) * kappa) + T(1));
  return u * T(0.5) * (th + T(1));
}

template <typename T, GeluForm Form> Vec<T> gelu_one(Vec<T> u, Vec<T>* dydu) {
  if constexpr (Form == GeluForm::tanh)
    return gelu_tanh<T>(u, dydu);
  else if constexpr (sizeof(T) == 4)
    return gelu_erf_f32(u, dydu);
  else
    return gelu_erf_f64(u, dydu);
}

// One row at a time: u = z + bias (bias broadcast over the rows), y = gelu(u), dydu = gelu'(u).
// y may be z (each vector is read before it is written).
template <typename T, GeluForm Form>
void gelu_block(T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t W = kWidth<T>;
  auto one = [&](Vec<T> u, T* yp, T* dp) {
    if (!dp) return store(yp, gelu_one<T, Form>(u, nullptr));
    Vec<T> d;
    store(yp, gelu_one<T, Form>(u, &d));
    store(dp, d);
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    T* yr = y + r * cols;
    T* dr = dydu ? dydu + r * cols : nullptr;
    const T* zr = z + r * cols;
    std::int64_t c = 0;
    for (; c + W <= cols; c += W)
      one(bias ? load(zr + c) + load(bias + c) : load(zr + c), yr + c, dr ? dr + c : nullptr);
    if (c == cols) continue;
    // the last partial vector through zero-padded copies
    const std::size_t bytes = static_cast<std::size_t>(cols - c) * sizeof(T);
    T zb[W] = {}, bb[W] = {}, yb[W], db[W];
    __builtin_memcpy(zb, zr + c, bytes);
    if (bias) __builtin_memcpy(bb, bias + c, bytes);
    one(load(zb) + load(bb), yb, dr ? db : nullptr);
    __builtin_memcpy(yr + c, yb, bytes);
    if (dr) __builtin_memcpy(dr + c, db, bytes);
  }
}

// Threads take blocks of this many elements (a multiple of every vector width).
constexpr std::int64_t kBlock = 4096;

// fn(y + i, x + i, len) over [0, n) in blocks, over the threads when worth it (`cost` simple
// operations per element: an exp is ~8).
template <typename T, typename Fn> void blocks(T* y, const T* x, std::int64_t n, std::int64_t cost, Fn fn) {
  const std::int64_t count = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(n, cost))
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t i = b * kBlock;
    fn(y + i, x + i, std::min(kBlock, n - i));
  }
}

template <typename T, GeluForm Form>
void gelu_blocks(T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kCost = 16; // an exp or tanh and a division
  if (!bias) { // one flat buffer: blocks of elements
    const std::int64_t n = rows * cols, count = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(n, kCost))
    for (std::int64_t b = 0; b < count; ++b) {
      const std::int64_t i = b * kBlock;
      gelu_block<T, Form>(y + i, dydu ? dydu + i : nullptr, z + i, nullptr, 1, std::min(kBlock, n - i));
    }
    return;
  }
  // blocks of whole rows (the bias repeats per row)
  const std::int64_t per = std::max<std::int64_t>(1, kBlock / std::max<std::int64_t>(cols, 1));
  const std::int64_t count = (rows + per - 1) / per;
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(rows * cols, kCost))
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t r = b * per, o = r * cols;
    gelu_block<T, Form>(y + o, dydu ? dydu + o : nullptr, z + o, bias, std::min(per, rows - r), cols);
  }
}

} // namespace

template <typename T> void exp_n(T* y, const T* x, std::int64_t n) {
  blocks(y, x, n, 8,
         [](T* yb, const T* xb, std::int64_t m) { map_vectors(yb, xb, m, [](Vec<T> v) { return vexp(v); }); });
}
template <typename T> void log_n(T* y, const T* x, std::int64_t n) {
  blocks(y, x, n, 8,
         [](T* yb, const T* xb, std::int64_t m) { map_vectors(yb, xb, m, [](Vec<T> v) { return vlog(v); }); });
}
template <typename T> void tanh_n(T* y, const T* x, std::int64_t n) {
  blocks(y, x, n, 8,
         [](T* yb, const T* xb, std::int64_t m) { map_vectors(yb, xb, m, [](Vec<T> v) { return vtanh(v); }); });
}

template <typename T>
void gelu_rows(T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols, GeluForm form) {
  if (form == GeluForm::tanh) gelu_blocks<T, GeluForm::tanh>(y, dydu, z, bias, rows, cols);
  else gelu_blocks<T, GeluForm::erf>(y, dydu, z, bias, rows, cols);
}

#define HEADGRAD_VECTOR_MATH(T)                                                                                     \
  template void exp_n<T>(T*, const T*, std::int64_t);                                                               \
  template void log_n<T>(T*, const T*, std::int64_t);                                                               \
  template void tanh_n<T>(T*, const T*, std::int64_t);                                                              \
  template void gelu_rows<T>(T*, T*, const T*, const T*, std::int64_t, std::int64_t, GeluForm);
HEADGRAD_VECTOR_MATH(float)
HEADGRAD_VECTOR_MATH(double)
#undef HEADGRAD_VECTOR_MATH

} // namespace headgrad::engine::HEADGRAD_ISA_NS
