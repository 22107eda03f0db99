// gemm.hpp - C = alpha op(A) op(B) + beta C through CBLAS, for float and double.
// Row-major; transposition is a flag plus a leading dimension, never a copy.
//
// Threads: a gemm big enough to share is split into row (or column) blocks of C, one per OpenMP
// thread, each block one single-threaded BLAS call. Measured on 2 cores (OpenBLAS 0.3.21, Zen
// kernels), C = A Bᵀ: 1024x64x64 88 us split vs 157 us with OpenBLAS's own 2 threads;
// 256x256x256 262 vs 309 us; 2048x1024x256 8.19 vs 8.34 ms - never slower. It also means one
// thread pool: OpenBLAS's threads (which spin ~0.1 s after each call by default) never compete
// with our OpenMP loops for the cores.
#pragma once
#include <cblas.h>
#include <cstdint>

#include "framework/engine/kernels/isa_namespace.hpp"
#include "framework/engine/runtime/startup.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// One BLAS call on the calling thread (no splitting; BLAS's own threading as configured).
// C = beta C for an (m x n) block with leading dimension ldc: a product with k = 0 is an empty sum.
// BLAS refuses k = 0 with lda = 0 (its argument check wants lda >= 1) and leaves C untouched, so
// such a gemm never reaches it; beta 0 assigns zeros (C may be uninitialised, as on a first write).
template <typename T> inline void scale_block(T* c, std::int64_t ldc, std::int64_t m, std::int64_t n, T beta) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

// One row of C (m = 1): c = alpha op(B)^T a + beta c as a gemv. BLAS's gemm packs all of op(B)
// into its blocked layout before multiplying, which for a single row costs more than the product
// (a language model sampling one token at a time runs every layer on one row). a is op(A)'s one
// row: stride 1, or lda when A is stored transposed (k x 1). beta 0 assigns: c is zeroed first,
// since gemv's scaling by 0 would keep a NaN an uninitialised c may hold.
template <typename T, typename Gemv>
inline void row_gemv(Gemv gemv, bool ta, bool tb, std::int64_t n, std::int64_t k, T alpha, const T* a,
                     std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c) {
  if (beta == T(0)) scale_block(c, n, 1, n, T(0));
  // op(B) (k x n): B stored (k x n) -> c = alpha B^T a; B stored (n x k) transposed -> c = alpha B a
  gemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, static_cast<int>(tb ? n : k), static_cast<int>(tb ? k : n),
       alpha, b, static_cast<int>(ldb), a, static_cast<int>(ta ? lda : 1), beta, c, 1);
}

inline void blas_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_block(c, ldc, m, n, beta);
  runtime::note_blas_kernel_once(); // a program that skipped runtime::configure() on a slow kernel is told
  if (m == 1) return row_gemv(cblas_sgemv, ta, tb, n, k, alpha, a, lda, b, ldb, beta, c);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

inline void blas_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                      std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_block(c, ldc, m, n, beta);
  runtime::note_blas_kernel_once();
  if (m == 1) return row_gemv(cblas_dgemv, ta, tb, n, k, alpha, a, lda, b, ldb, beta, c);
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// How many blocks to split an m x n x k gemm into: 1 (do not split) when there is one thread,
// we are already inside a parallel region, or the gemm is too small to pay for a thread hand-off.
int gemm_split_parts(std::int64_t m, std::int64_t n, std::int64_t k);

// Runs fn(ctx, i) for i in [0, count) over the OpenMP threads with BLAS limited to one thread
// meanwhile (restored afterwards): whole BLAS calls per thread, never BLAS threads inside ours.
void run_blas_parallel(std::int64_t count, void (*fn)(void* ctx, std::int64_t i), void* ctx);

template <typename T>
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  const int parts = gemm_split_parts(m, n, k);
  if (parts <= 1) {
    blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split C's longer side. Rows r0..r1 of C need rows r0..r1 of op(A) (stored rows if A is not
  // transposed, stored columns if it is); columns c0..c1 need columns c0..c1 of op(B).
  const bool rows = m >= n;
  const std::int64_t len = rows ? m : n;
  auto block = [&](std::int64_t p) {
    const std::int64_t lo = len * p / parts, hi = len * (p + 1) / parts;
    if (rows)
      blas_gemm(ta, tb, hi - lo, n, k, alpha, a + (ta ? lo : lo * lda), lda, b, ldb, beta, c + lo * ldc, ldc);
    else
      blas_gemm(ta, tb, m, hi - lo, k, alpha, a, lda, b + (tb ? lo * ldb : lo), ldb, beta, c + lo, ldc);
  };
  run_blas_parallel(parts, [](void* ctx, std::int64_t p) { (*static_cast<decltype(block)*>(ctx))(p); }, &block);
}

HEADGRAD_ISA_END
} // namespace headgrad::engine
