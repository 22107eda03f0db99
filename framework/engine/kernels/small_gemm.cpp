#include "framework/engine/kernels/small_gemm.hpp"

#include <cstring>

#ifndef HEADGRAD_ISA_NS
#error "small_gemm.cpp is compiled per instruction set (CMakeLists.txt: HEADGRAD_ISA_SOURCES)"
#endif

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN // built per instruction set only (isa_namespace.hpp): the library calls the active
                   // copy through its table (kernel_table.cpp), attention's copies their own

namespace {

// C = alpha op(A) op(B) + beta C for n == N, a multiple of the vector width W: two rows of C at a
// time, each held in N / W vector registers, so every row of op(B) loaded feeds both. op(B)'s
// rows are read in place when B is not transposed, and copied into a row-major k x N block
// (4 KiB at most) first when it is; A is read one scalar at a time, broadcast. Each C element is
// one dot product summed in order of k, as the plain definition (no reassociation, no FMA).
// Written with GCC/clang vector types rather than left to the auto-vectoriser, which for the
// NoTrans A case vectorised over k instead (strided gathers, 10x slower).
template <int Bytes, std::int64_t N, bool TA, bool TB, typename T>
inline void gemm_rows(std::int64_t m, std::int64_t k, T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb,
                      T beta, T* c, std::int64_t ldc) {
  typedef T vec __attribute__((vector_size(Bytes)));
  constexpr std::int64_t W = Bytes / sizeof(T), NV = N / W;
  static_assert(N % W == 0);
  T packed[TB ? kSmallGemmMax * kSmallGemmMax : 1];
  const T* brows = b;
  std::int64_t ldr = ldb;
  if constexpr (TB) {
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t t = 0; t < k; ++t) packed[t * N + j] = b[j * ldb + t];
    brows = packed;
    ldr = N;
  }
  auto a_at = [&](std::int64_t i, std::int64_t t) { return TA ? a[t * lda + i] : a[i * lda + t]; };
  // (vectors move through memcpy, never by value: passing them is ABI-dependent)
  auto store = [&](T* crow, const vec* acc) {
    for (std::int64_t v = 0; v < NV; ++v) {
      vec r = alpha * acc[v];
      if (beta != T(0)) { // beta == 0: C is not read
        vec old;
        std::memcpy(&old, crow + v * W, sizeof(vec));
        r += beta * old;
      }
      std::memcpy(crow + v * W, &r, sizeof(vec));
    }
  };
  std::int64_t i = 0;
  for (; i + 2 <= m; i += 2) {
    vec acc0[NV] = {}, acc1[NV] = {};
    for (std::int64_t t = 0; t < k; ++t) {
      const T a0 = a_at(i, t), a1 = a_at(i + 1, t);
      const T* brow = brows + t * ldr;
      for (std::int64_t v = 0; v < NV; ++v) {
        vec bv;
        std::memcpy(&bv, brow + v * W, sizeof(vec));
        acc0[v] += a0 * bv;
        acc1[v] += a1 * bv;
      }
    }
    store(c + i * ldc, acc0);
    store(c + (i + 1) * ldc, acc1);
  }
  if (i < m) {
    vec acc[NV] = {};
    for (std::int64_t t = 0; t < k; ++t) {
      const T ai = a_at(i, t);
      const T* brow = brows + t * ldr;
      for (std::int64_t v = 0; v < NV; ++v) {
        vec bv;
        std::memcpy(&bv, brow + v * W, sizeof(vec));
        acc[v] += ai * bv;
      }
    }
    store(c + i * ldc, acc);
  }
}

// Any n: plain loops over a packed op(B), one row of C at a time.
template <typename T>
void gemm_any(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
              const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  T bp[kSmallGemmMax * kSmallGemmMax];
  for (std::int64_t t = 0; t < k; ++t)
    for (std::int64_t j = 0; j < n; ++j) bp[t * n + j] = tb ? b[j * ldb + t] : b[t * ldb + j];
  for (std::int64_t i = 0; i < m; ++i) {
    T acc[kSmallGemmMax] = {};
    for (std::int64_t t = 0; t < k; ++t) {
      const T ait = ta ? a[t * lda + i] : a[i * lda + t];
      for (std::int64_t j = 0; j < n; ++j) acc[j] += ait * bp[t * n + j];
    }
    T* crow = c + i * ldc;
    for (std::int64_t j = 0; j < n; ++j) crow[j] = beta == T(0) ? alpha * acc[j] : alpha * acc[j] + beta * crow[j];
  }
}

template <int Bytes, std::int64_t N, typename T>
inline void gemm_flags(bool ta, bool tb, std::int64_t m, std::int64_t k, T alpha, const T* a, std::int64_t lda,
                       const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (ta && tb) gemm_rows<Bytes, N, true, true>(m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (ta) gemm_rows<Bytes, N, true, false>(m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (tb) gemm_rows<Bytes, N, false, true>(m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else gemm_rows<Bytes, N, false, false>(m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The widths 8, 16 and 32 (attention's head sizes) get their own code with n fixed at compile time.
template <int Bytes, typename T>
inline void gemm_dispatch(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (n == 8) gemm_flags<Bytes, 8>(ta, tb, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (n == 16) gemm_flags<Bytes, 16>(ta, tb, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (n == 32) gemm_flags<Bytes, 32>(ta, tb, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else gemm_any(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// This copy's vector width (isa_namespace.hpp): 32 bytes from AVX2 on (with AVX-512 too: 64-byte
// vectors would not divide the head width 8), 16 (SSE2, every x86-64) below.
template <typename T>
void run(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
         const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
#if defined(__AVX2__)
  gemm_dispatch<32>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  gemm_dispatch<16>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

} // namespace

void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  run(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  run(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

HEADGRAD_ISA_END
} // namespace headgrad::engine
