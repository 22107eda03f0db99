// attention_rows.cpp - see attention_rows.hpp. Three loops do every product, each over R query
// rows (or R keys) at a time, their sums held in vector registers:
//   scores    S = alpha A Bᵀ      (Q Kᵀ, dO Vᵀ)   a row's scores a vector of keys at a time, from
//                                                 Bᵀ transposed once per pair (keys contiguous)
//   row_sums  X = alpha Wt M      (P V, dS K)     a row's weighted sum of M's rows, d_head wide
//   key_sums  X = alpha Wtᵀ M     (Pᵀ dO, dSᵀ Q)  a key's sum over the rows that keep it
// Each runs only over the keys a row keeps (its extent, below), and so does the softmax between
// them (softmax_kept, its VJP softmax_kept_backward). Built per instruction set; the products use
// FMA where the copy has it (fmadd): these sums are not compared bit for bit with anything.
#include "framework/engine/kernels/attention_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <limits>
#include <type_traits>

#include "framework/engine/kernels/row_softmax.hpp"
#include "framework/engine/kernels/scratch.hpp"
#include "framework/engine/kernels/small_gemm.hpp"
#include "framework/engine/kernels/vec_math.hpp"

#ifndef HEADGRAD_ISA_NS
#error "attention_rows.cpp is compiled per instruction set (CMakeLists.txt: HEADGRAD_ISA_SOURCES)"
#endif

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN
namespace attention_rows_detail { // (named: this file shares a unity-build source with other kernels)

// This copy's vector: 64 bytes with AVX-512, 32 with AVX2, 16 (SSE2) on any x86-64.
#if defined(__AVX512F__)
constexpr int kBytes = 64;
#elif defined(__AVX2__)
constexpr int kBytes = 32;
#else
constexpr int kBytes = 16;
#endif

template <typename T> struct Vec {
  typedef T type __attribute__((vector_size(kBytes)));
  static constexpr std::int64_t W = kBytes / sizeof(T); // lanes
};

// Every lane x (x - 0 is x exactly, -0 included, so this is a broadcast and nothing else).
template <typename V, typename T> inline V splat(T x) { return x - V{}; }

// a b + c in one rounding where the copy has FMA (AVX2, AVX-512); a b + c elsewhere. (The copies
// are built with -ffp-contract=off, so GCC fuses nothing by itself: CMakeLists.txt says why.)
template <typename V> inline V fmadd(V a, V b, V c) {
#if defined(__FMA__)
  using T = std::remove_cvref_t<decltype(a[0])>;
  constexpr bool f32 = std::is_same_v<T, float>;
  if constexpr (sizeof(V) == 64 && f32) return (V)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
  else if constexpr (sizeof(V) == 64) return (V)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
  else if constexpr (sizeof(V) == 32 && f32) return (V)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
  else if constexpr (sizeof(V) == 32) return (V)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
  else return a * b + c;
#else
  return a * b + c;
#endif
}

// (vectors move through memcpy: unaligned, and never passed by value across a call)
template <typename V, typename T> inline V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V, typename T> inline void store(T* p, const V& v) { std::memcpy(p, &v, sizeof(V)); }

// Rows (or keys) per block: R x 2 sums, the two vectors they multiply and a broadcast in
// registers - R = 8 in AVX-512's 32, R = 4 in the 16 of AVX2 and SSE.
#if defined(__AVX512F__)
constexpr int kR = 8;
#else
constexpr int kR = 4;
#endif

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

template <typename T> std::int64_t kept_len(const RowsHead<T>& h, std::int64_t i) {
  return h.lens ? std::clamp<std::int64_t>(h.lens[i], 0, h.Tk) : h.Tk;
}

// The keys row i's products run over, given its weights p (Tk): its kept prefix, past which p is
// 0; or every key when the row is NaN (the softmax makes every weight of such a row NaN, as the
// gemm path then multiplies them).
template <typename T> std::int64_t extent(const T* p, std::int64_t kept, std::int64_t Tk) {
  return Tk > 0 && p[0] != p[0] ? Tk : kept;
}

// Whether a rows x cols block (cols a whole number of vectors, row stride ld) is free of NaN and
// infinity: x - x is 0 for every finite x and NaN otherwise, and a NaN stays in the sum.
template <typename T> bool all_finite(const T* x, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  using V = typename Vec<T>::type;
  constexpr std::int64_t W = Vec<T>::W;
  V s0 = {}, s1 = {}, s2 = {}, s3 = {}; // four rows at a time: one sum would make each add wait
  std::int64_t i = 0;
  for (; i + 4 <= rows; i += 4)
    for (std::int64_t c = 0; c < cols; c += W) {
      const V a = load<V>(x + i * ld + c), b = load<V>(x + (i + 1) * ld + c);
      const V e = load<V>(x + (i + 2) * ld + c), f = load<V>(x + (i + 3) * ld + c);
      s0 += a - a;
      s1 += b - b;
      s2 += e - e;
      s3 += f - f;
    }
  for (; i < rows; ++i)
    for (std::int64_t c = 0; c < cols; c += W) {
      const V a = load<V>(x + i * ld + c);
      s0 += a - a;
    }
  const V all = (s0 + s1) + (s2 + s3);
  for (std::int64_t l = 0; l < W; ++l)
    if (all[l] != T(0)) return false;
  return true;
}

// BT (cols x ldt) = Bᵀ for B (rows x cols, row stride ldb), and zeros in BT's columns rows..ldt:
// the scores' loads of whole vectors of keys then read zeros past the last key.
template <typename T>
void transpose_padded(T* BT, std::int64_t ldt, const T* B, std::int64_t ldb, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t t = 0; t < cols; ++t)
    for (std::int64_t j = 0; j < rows; ++j) BT[t * ldt + j] = B[j * ldb + t];
  for (std::int64_t t = 0; t < cols; ++t) std::fill(BT + t * ldt + rows, BT + (t + 1) * ldt, T(0));
}

// ---- the softmax over a row's kept keys ---------------------------------------------------------
// exp of every lane: exp_f32 (vec_math.hpp) written on vectors for float, the same operations in
// the same order (so the same values); std::exp lane by lane for double, as exp_any.
template <typename V> inline V vexp(V x) {
  using T = std::remove_cvref_t<decltype(x[0])>;
  if constexpr (std::is_same_v<T, float>) {
    typedef std::int32_t IV __attribute__((vector_size(sizeof(V))));
    using E = ExpF32;
    const V zero = {}, lo = splat<V>(E::kMin), hi = splat<V>(E::kMax), shift = splat<V>(E::kShift);
    const IV is_nan = x != x, over = x > hi, under = x < lo;
    const V xmax = x < lo ? lo : x;
    const V xc = hi < xmax ? hi : xmax; // std::min(std::max(x, lo), hi), a NaN kept
    const V t = xc * E::kLog2e + shift;
    const V n = t - shift;
    const IV ni = (IV)t - (IV)shift;
    const V r = (xc - n * E::kLn2Hi) - n * E::kLn2Lo;
    const V er = E::reduced(r);
    const IV half = ni >> 1;
    const V y = er * (V)((half + 127) << 23) * (V)((ni - half + 127) << 23);
    const V inf = zero + std::numeric_limits<float>::infinity();
    return is_nan ? x : over ? inf : under ? zero : y;
  } else {
    V y;
    for (std::int64_t l = 0; l < static_cast<std::int64_t>(sizeof(V) / sizeof(T)); ++l) y[l] = std::exp(x[l]);
    return y;
  }
}

// The lanes of a vector of `Bytes` combined by op, pairwise: its two halves combined, then their
// halves, down to one lane (GCC turns the half copies into register extracts).
template <typename T, int Bytes, typename Op> T reduce_lanes(const void* v, Op op) {
  if constexpr (Bytes == static_cast<int>(sizeof(T))) {
    T x;
    std::memcpy(&x, v, sizeof(T));
    return x;
  } else {
    typedef T H __attribute__((vector_size(Bytes / 2)));
    H lo, hi;
    std::memcpy(&lo, v, Bytes / 2);
    std::memcpy(&hi, static_cast<const char*>(v) + Bytes / 2, Bytes / 2);
    const H r = op(lo, hi);
    return reduce_lanes<T, Bytes / 2>(&r, op);
  }
}
template <typename T> T max_lanes_of(const typename Vec<T>::type& v) {
  return reduce_lanes<T, kBytes>(&v, [](auto a, auto b) { return a > b ? a : b; });
}
template <typename T> T sum_lanes_of(const typename Vec<T>::type& v) {
  return reduce_lanes<T, kBytes>(&v, [](auto a, auto b) { return a + b; });
}

// Vector v of row x (readable to whole vectors), its lanes from `len` on replaced by `fill`.
template <typename T> typename Vec<T>::type kept_vector(const T* x, std::int64_t v, std::int64_t len, T fill) {
  using V = typename Vec<T>::type;
  constexpr std::int64_t W = Vec<T>::W;
  typedef std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t> I;
  typedef I IV __attribute__((vector_size(kBytes)));
  const V x0 = load<V>(x + v * W);
  if ((v + 1) * W <= len) return x0;
  IV lane;
  for (std::int64_t l = 0; l < W; ++l) lane[l] = static_cast<I>(l);
  return lane < static_cast<I>(len - v * W) ? x0 : splat<V>(fill);
}

// p[0, Tk) = softmax over s[0, len), 0 past it, as softmax_row (row_softmax.hpp) has it: a NaN or
// +inf among the kept scores makes every weight NaN; a row with nothing kept (or only -inf) is all
// 0. s (readable to whole vectors past len) is overwritten with the exponentials.
template <typename T> void softmax_kept(T* p, T* s, std::int64_t len, std::int64_t Tk) {
  using V = typename Vec<T>::type;
  constexpr std::int64_t W = Vec<T>::W;
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const std::int64_t nv = ceil_div(len, W);
  V mx = splat<V>(-kInf);
  for (std::int64_t v = 0; v < nv; ++v) {
    const V x = kept_vector(s, v, len, -kInf);
    mx = mx > x ? mx : x; // (may drop a NaN: the sum below carries it)
  }
  const T m = max_lanes_of<T>(mx);
  if (m == -kInf) { // nothing kept, or only -inf - or a NaN among -infs, which the max dropped
    const bool nan = std::any_of(s, s + len, [](T x) { return x != x; });
    std::fill(p, p + Tk, nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
    return;
  }
  V sum = {};
  for (std::int64_t v = 0; v < nv; ++v) {
    const V e = vexp(kept_vector(s, v, len, -kInf) - m); // exp(-inf) = 0 past len; NaN for a NaN, or at m = +inf
    store(s + v * W, e);
    sum += e;
  }
  const T inv = T(1) / sum_lanes_of<T>(sum);
  // p = e / sum: 0 past len (e is), NaN on every key of a NaN row (inv is) - whole vectors while
  // they fit in the row, then lane by lane
  std::int64_t j = 0;
  for (; j < nv * W && j + W <= Tk; j += W) store(p + j, load<V>(s + j) * inv);
  for (; j < len; ++j) p[j] = s[j] * inv;
  const T rest = inv == inv ? T(0) : inv;
  for (; j + W <= Tk; j += W) store(p + j, splat<V>(rest));
  for (; j < Tk; ++j) p[j] = rest;
}

// A pair the loop gemms of small_gemm.hpp would take (every side at most kSmallGemmMax).
inline bool tiny_pair(std::int64_t Tq, std::int64_t Tk, std::int64_t dh) {
  return Tq <= kSmallGemmMax && Tk <= kSmallGemmMax && dh <= kSmallGemmMax;
}

// ---- the pair, its products with FMA or without -------------------------------------------------
// Fma = false rounds every product and sum as the loop gemms of small_gemm.hpp do, so that a pair
// small enough for them gets the values it got from them (a model of that size has golden results
// against PyTorch to keep); the larger ones take the FMA.
template <bool Fma> struct Pair {
  template <typename V> static V madd(V a, V b, V c) {
    if constexpr (Fma) return fmadd(a, b, c);
    else return a * b + c;
  }

  // Its VJP for a row whose weights y are 0 past len: d = y (g - sum_j g_j y_j), in place over g
  // (the row of dP, readable to whole vectors; the result 0 from len on, to the end of that vector).
  template <typename T> static void softmax_kept_backward(T* g, const T* y, std::int64_t len, std::int64_t Tk) {
    using V = typename Vec<T>::type;
    constexpr std::int64_t W = Vec<T>::W;
    const std::int64_t nv = ceil_div(len, W);
    auto y_at = [&](std::int64_t v) { // y's vector v, 0 from len on (lane by lane where y's row ends)
      if ((v + 1) * W <= Tk) return kept_vector(y, v, len, T(0));
      V x = {};
      for (std::int64_t l = 0; v * W + l < len; ++l) x[l] = y[v * W + l];
      return x;
    };
    V acc = {};
    for (std::int64_t v = 0; v < nv; ++v) acc = madd(load<V>(g + v * W), y_at(v), acc);
    const T dot = sum_lanes_of<T>(acc);
    for (std::int64_t v = 0; v < nv; ++v) store(g + v * W, y_at(v) * (load<V>(g + v * W) - dot));
  }

  // X[r, c] = alpha x, or X[r, c] += alpha x (assign false), for NV vectors of row r from column c;
  // with flush, a result below the smallest normal number is stored as 0 (attention_heads.cpp's
  // flush_subnormal, for the gradients, done here as they are stored).
  template <int NV, typename V, typename T> static void put(T* x, const V* acc, T alpha, bool assign, bool flush) {
    constexpr std::int64_t W = sizeof(V) / sizeof(T);
    constexpr T tiny = std::numeric_limits<T>::min();
    for (int k = 0; k < NV; ++k) {
      V out = assign ? alpha * acc[k] : madd(splat<V>(alpha), acc[k], load<V>(x + k * W));
      if (flush) out = out < tiny && out > -tiny ? V{} : out;
      store(x + k * W, out);
    }
  }

  // ---- scores: S[r, j] = alpha sum_t A[r, t] BT[t, j] for R rows and keys j < nv vectors ---------
  template <int R, int NV, typename T>
  static void scores_block(T* S, std::int64_t lds, const T* A, std::int64_t lda, const T* BT, std::int64_t ldt,
                           std::int64_t j0, std::int64_t dh, T alpha) {
    using V = typename Vec<T>::type;
    constexpr std::int64_t W = Vec<T>::W;
    V acc[R][NV] = {};
    for (std::int64_t t = 0; t < dh; ++t) {
      V b[NV];
      for (int k = 0; k < NV; ++k) b[k] = load<V>(BT + t * ldt + j0 + k * W);
      for (int r = 0; r < R; ++r) {
        const T a = A[r * lda + t];
        for (int k = 0; k < NV; ++k) acc[r][k] = madd(splat<V>(a), b[k], acc[r][k]);
      }
    }
    for (int r = 0; r < R; ++r) put<NV>(S + r * lds + j0, acc[r], alpha, true, false);
  }

  template <int R, typename T>
  static void scores(T* S, std::int64_t lds, const T* A, std::int64_t lda, const T* BT, std::int64_t ldt,
                     std::int64_t nv, std::int64_t dh, T alpha) {
    constexpr std::int64_t W = Vec<T>::W;
    std::int64_t v = 0;
    for (; v + 2 <= nv; v += 2) scores_block<R, 2>(S, lds, A, lda, BT, ldt, v * W, dh, alpha);
    if (v < nv) scores_block<R, 1>(S, lds, A, lda, BT, ldt, v * W, dh, alpha);
  }

  // ---- row_sums: X[r, :] = alpha sum_{j < n} Wt[r, j] M[j, :] for R rows --------------------------
  template <int R, int NV, typename T>
  static void row_sums_block(T* X, std::int64_t ldx, const T* Wt, std::int64_t ldw, const T* M, std::int64_t ldm,
                             std::int64_t n, std::int64_t c0, T alpha, bool assign, bool flush) {
    using V = typename Vec<T>::type;
    constexpr std::int64_t W = Vec<T>::W;
    V acc[R][NV] = {};
    for (std::int64_t j = 0; j < n; ++j) {
      V m[NV];
      for (int k = 0; k < NV; ++k) m[k] = load<V>(M + j * ldm + c0 + k * W);
      for (int r = 0; r < R; ++r) {
        const T w = Wt[r * ldw + j];
        for (int k = 0; k < NV; ++k) acc[r][k] = madd(splat<V>(w), m[k], acc[r][k]);
      }
    }
    for (int r = 0; r < R; ++r) put<NV>(X + r * ldx + c0, acc[r], alpha, assign, flush);
  }

  template <int R, typename T>
  static void row_sums(T* X, std::int64_t ldx, const T* Wt, std::int64_t ldw, const T* M, std::int64_t ldm,
                       std::int64_t n, std::int64_t dh, T alpha, bool assign, bool flush) {
    constexpr std::int64_t W = Vec<T>::W;
    std::int64_t c = 0;
    for (; c + 2 * W <= dh; c += 2 * W) row_sums_block<R, 2>(X, ldx, Wt, ldw, M, ldm, n, c, alpha, assign, flush);
    if (c < dh) row_sums_block<R, 1>(X, ldx, Wt, ldw, M, ldm, n, c, alpha, assign, flush);
  }

  // Every query row i < rows: R at a time over the keys the R rows reach (ext), then one at a time.
  template <typename T>
  static void query_sums(T* X, std::int64_t ldx, const T* Wt, std::int64_t ldw, const T* M, std::int64_t ldm,
                         const std::int64_t* ext, std::int64_t rows, std::int64_t dh, T alpha, bool assign) {
    std::int64_t i = 0;
    for (; i + kR <= rows; i += kR)
      row_sums<kR>(X + i * ldx, ldx, Wt + i * ldw, ldw, M, ldm, *std::max_element(ext + i, ext + i + kR), dh, alpha,
                   assign, true);
    for (; i < rows; ++i) row_sums<1>(X + i * ldx, ldx, Wt + i * ldw, ldw, M, ldm, ext[i], dh, alpha, assign, true);
  }

  // ---- key_sums: X[j0 + r, :] = alpha sum_i Wt[i, j0 + r] M[i, :] for R keys ----------------------
  // over the rows i whose extent reaches past j0 (the others' weights on these keys are 0).
  template <int R, int NV, typename T>
  static void key_sums_block(T* X, std::int64_t ldx, const T* Wt, std::int64_t ldw, const T* M, std::int64_t ldm,
                             const std::int64_t* ext, std::int64_t rows, std::int64_t j0, std::int64_t c0, T alpha,
                             bool assign) {
    using V = typename Vec<T>::type;
    constexpr std::int64_t W = Vec<T>::W;
    V acc[R][NV] = {};
    for (std::int64_t i = 0; i < rows; ++i) {
      if (ext[i] <= j0) continue;
      V m[NV];
      for (int k = 0; k < NV; ++k) m[k] = load<V>(M + i * ldm + c0 + k * W);
      for (int r = 0; r < R; ++r) {
        const T w = Wt[i * ldw + j0 + r];
        for (int k = 0; k < NV; ++k) acc[r][k] = madd(splat<V>(w), m[k], acc[r][k]);
      }
    }
    for (int r = 0; r < R; ++r) put<NV>(X + (j0 + r) * ldx + c0, acc[r], alpha, assign, true);
  }

  template <int R, typename T>
  static void key_sums_at(T* X, std::int64_t ldx, const T* Wt, std::int64_t ldw, const T* M, std::int64_t ldm,
                          const std::int64_t* ext, std::int64_t rows, std::int64_t j0, std::int64_t dh, T alpha,
                          bool assign) {
    constexpr std::int64_t W = Vec<T>::W;
    std::int64_t c = 0;
    for (; c + 2 * W <= dh; c += 2 * W) key_sums_block<R, 2>(X, ldx, Wt, ldw, M, ldm, ext, rows, j0, c, alpha, assign);
    if (c < dh) key_sums_block<R, 1>(X, ldx, Wt, ldw, M, ldm, ext, rows, j0, c, alpha, assign);
  }

  // Every key j < keys: R at a time, then one at a time.
  template <typename T>
  static void key_sums(T* X, std::int64_t ldx, const T* Wt, std::int64_t ldw, const T* M, std::int64_t ldm,
                       const std::int64_t* ext, std::int64_t rows, std::int64_t keys, std::int64_t dh, T alpha,
                       bool assign) {
    std::int64_t j = 0;
    for (; j + kR <= keys; j += kR) key_sums_at<kR>(X, ldx, Wt, ldw, M, ldm, ext, rows, j, dh, alpha, assign);
    for (; j < keys; ++j) key_sums_at<1>(X, ldx, Wt, ldw, M, ldm, ext, rows, j, dh, alpha, assign);
  }

  // ---- the pair ------------------------------------------------------------------------------------
  // Forward for query rows i0 .. i0 + R: scores over the keys the rows keep, softmax, O = P V.
  template <int R, typename T>
  static void forward_rows(T* O, std::int64_t ldo, T* P, T* S, std::int64_t lds, const T* KT, const RowsHead<T>& h,
                           std::int64_t i0, T scale) {
    constexpr std::int64_t W = Vec<T>::W;
    std::int64_t kept = 0;
    for (int r = 0; r < R; ++r) kept = std::max(kept, kept_len(h, i0 + r));
    scores<R>(S, lds, h.Q + i0 * h.ldq, h.ldq, KT, lds, ceil_div(kept, W), h.dh, scale); // S = s Q Kᵀ
    std::int64_t n = 0;
    for (int r = 0; r < R; ++r) { // P = softmax(S) over the kept keys (0 past them)
      T* p = P + (i0 + r) * h.Tk;
      softmax_kept(p, S + r * lds, kept_len(h, i0 + r), h.Tk);
      n = std::max(n, extent(p, kept_len(h, i0 + r), h.Tk));
    }
    row_sums<R>(O + i0 * ldo, ldo, P + i0 * h.Tk, h.Tk, h.V, h.ldv, n, h.dh, T(1), true, false); // O = P V
  }

  // dS for query rows i0 .. i0 + R, in place of their dP = dO Vᵀ (row stride lds), zeros past each
  // row's extent.
  template <int R, typename T>
  static void score_grad_rows(T* dS, std::int64_t lds, const T* dO, std::int64_t ldo, const T* P, const T* VT,
                              const std::int64_t* ext, const RowsHead<T>& h, std::int64_t i0) {
    constexpr std::int64_t W = Vec<T>::W;
    std::int64_t n = 0;
    for (int r = 0; r < R; ++r) n = std::max(n, ext[i0 + r]);
    scores<R>(dS + i0 * lds, lds, dO + i0 * ldo, ldo, VT, lds, ceil_div(n, W), h.dh, T(1)); // dP = dO Vᵀ
    for (int r = 0; r < R; ++r) { // dS = P (dP - rowsum(dP P)), masked keys 0
      const std::int64_t i = i0 + r;
      T* d = dS + i * lds;
      if (ext[i] == kept_len(h, i)) {
        softmax_kept_backward(d, P + i * h.Tk, ext[i], h.Tk);
        std::fill(d + ceil_div(ext[i], Vec<T>::W) * Vec<T>::W, d + lds, T(0));
      } else { // a NaN row: row_softmax.hpp's rule for its masked keys
        softmax_row_backward(d, true, d, P + i * h.Tk, h.Tk, kept_len(h, i), nullptr);
        std::fill(d + h.Tk, d + lds, T(0));
      }
    }
  }

  template <typename T> static bool forward(T* O, std::int64_t ldo, T* P, const RowsHead<T>& h, T scale) {
    if (!all_finite(h.V, h.Tk, h.dh, h.ldv)) return false;
    const std::int64_t lds = ceil_div(h.Tk, Vec<T>::W) * Vec<T>::W; // keys padded to whole vectors
    thread_local Scratch<T> KT, S;
    KT.resize(static_cast<std::size_t>(h.dh * lds));
    S.resize(static_cast<std::size_t>(kR * lds));
    transpose_padded(KT.data(), lds, h.K, h.ldk, h.Tk, h.dh);
    std::int64_t i = 0;
    for (; i + kR <= h.Tq; i += kR) forward_rows<kR>(O, ldo, P, S.data(), lds, KT.data(), h, i, scale);
    for (; i < h.Tq; ++i) forward_rows<1>(O, ldo, P, S.data(), lds, KT.data(), h, i, scale);
    return true;
  }

  template <typename T>
  static bool backward(T* dQ, bool q_first, T* dK, bool k_first, T* dV, bool v_first, const T* dO, std::int64_t ldo,
                       const T* P, const RowsHead<T>& h, T scale) {
    if (!all_finite(h.Q, h.Tq, h.dh, h.ldq) || !all_finite(h.K, h.Tk, h.dh, h.ldk) ||
        !all_finite(h.V, h.Tk, h.dh, h.ldv) || !all_finite(dO, h.Tq, h.dh, ldo))
      return false;
    thread_local Scratch<std::int64_t> ext;
    ext.resize(static_cast<std::size_t>(h.Tq));
    for (std::int64_t i = 0; i < h.Tq; ++i) ext[i] = extent(P + i * h.Tk, kept_len(h, i), h.Tk);
    if (dV) key_sums(dV, h.ldv, P, h.Tk, dO, ldo, ext.data(), h.Tq, h.Tk, h.dh, T(1), v_first); // dV = Pᵀ dO
    if (!dQ && !dK) return true;
    const std::int64_t lds = ceil_div(h.Tk, Vec<T>::W) * Vec<T>::W;
    thread_local Scratch<T> VT, dS;
    VT.resize(static_cast<std::size_t>(h.dh * lds));
    dS.resize(static_cast<std::size_t>(h.Tq * lds));
    transpose_padded(VT.data(), lds, h.V, h.ldv, h.Tk, h.dh);
    std::int64_t i = 0;
    for (; i + kR <= h.Tq; i += kR) score_grad_rows<kR>(dS.data(), lds, dO, ldo, P, VT.data(), ext.data(), h, i);
    for (; i < h.Tq; ++i) score_grad_rows<1>(dS.data(), lds, dO, ldo, P, VT.data(), ext.data(), h, i);
    if (dQ) query_sums(dQ, h.ldq, dS.data(), lds, h.K, h.ldk, ext.data(), h.Tq, h.dh, scale, q_first); // dQ = s dS K
    if (dK) key_sums(dK, h.ldk, dS.data(), lds, h.Q, h.ldq, ext.data(), h.Tq, h.Tk, h.dh, scale, k_first); // s dSᵀ Q
    return true;
  }
};

} // namespace attention_rows_detail

template <typename T> bool attention_rows_fit(std::int64_t Tk, std::int64_t dh) {
  return Tk > 0 && Tk <= kRowsMaxKeys && dh > 0 && dh % attention_rows_detail::Vec<T>::W == 0;
}

template <typename T> bool attention_rows_forward(T* O, std::int64_t ldo, T* P, const RowsHead<T>& h, T scale) {
  using attention_rows_detail::Pair;
  return attention_rows_detail::tiny_pair(h.Tq, h.Tk, h.dh) ? Pair<false>::forward(O, ldo, P, h, scale)
                                                            : Pair<true>::forward(O, ldo, P, h, scale);
}

template <typename T>
bool attention_rows_backward(T* dQ, bool q_first, T* dK, bool k_first, T* dV, bool v_first, const T* dO,
                             std::int64_t ldo, const T* P, const RowsHead<T>& h, T scale) {
  using attention_rows_detail::Pair;
  return attention_rows_detail::tiny_pair(h.Tq, h.Tk, h.dh)
             ? Pair<false>::backward(dQ, q_first, dK, k_first, dV, v_first, dO, ldo, P, h, scale)
             : Pair<true>::backward(dQ, q_first, dK, k_first, dV, v_first, dO, ldo, P, h, scale);
}

#define HEADGRAD_ATTENTION_ROWS_INSTANCES(T)                                                                           \
  template bool attention_rows_fit<T>(std::int64_t, std::int64_t);                                                     \
  template bool attention_rows_forward<T>(T*, std::int64_t, T*, const RowsHead<T>&, T);                                \
  template bool attention_rows_backward<T>(T*, bool, T*, bool, T*, bool, const T*, std::int64_t, const T*,             \
                                           const RowsHead<T>&, T);
HEADGRAD_ATTENTION_ROWS_INSTANCES(float)
HEADGRAD_ATTENTION_ROWS_INSTANCES(double)

HEADGRAD_ISA_END
} // namespace headgrad::engine
