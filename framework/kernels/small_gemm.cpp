#include "framework/kernels/small_gemm.hpp"

namespace headgrad::kernels {

namespace {

// op(B) is first copied into a row-major k x n block (4 KiB at most), so the inner loop runs
// along contiguous rows of C and of op(B) and vectorises; A is read one scalar at a time.
// N > 0: n == N known at compile time, so a row of C stays in registers (the common head sizes);
// N == 0: any n.
template <std::int64_t N, typename T>
inline void small_gemm_impl(bool ta, bool tb, std::int64_t m, std::int64_t n_rt, std::int64_t k, T alpha, const T* a,
                            std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  const std::int64_t n = N > 0 ? N : n_rt;
  T bp[kSmallGemmMax * kSmallGemmMax];
  if (tb)
    for (std::int64_t t = 0; t < k; ++t)
      for (std::int64_t j = 0; j < n; ++j) bp[t * n + j] = b[j * ldb + t];
  else
    for (std::int64_t t = 0; t < k; ++t)
      for (std::int64_t j = 0; j < n; ++j) bp[t * n + j] = b[t * ldb + j];
  for (std::int64_t i = 0; i < m; ++i) {
    T acc[N > 0 ? N : kSmallGemmMax] = {};
    for (std::int64_t t = 0; t < k; ++t) {
      const T ait = ta ? a[t * lda + i] : a[i * lda + t];
      const T* brow = bp + t * n;
      for (std::int64_t j = 0; j < n; ++j) acc[j] += ait * brow[j];
    }
    T* crow = c + i * ldc;
    if (beta == T(0))
      for (std::int64_t j = 0; j < n; ++j) crow[j] = alpha * acc[j];
    else
      for (std::int64_t j = 0; j < n; ++j) crow[j] = alpha * acc[j] + beta * crow[j];
  }
}

template <typename T>
inline void small_gemm_dispatch(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                                std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  switch (n) {
  case 8: small_gemm_impl<8>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
  case 16: small_gemm_impl<16>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
  case 32: small_gemm_impl<32>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
  default: small_gemm_impl<0>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); break;
  }
}

} // namespace

// The float version is cloned for AVX2 like softmax_row_f32 (see row_softmax_f32.cpp for why not
// under the sanitizers); double serves the float64 gradient checks.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx2", "default"), flatten))
#endif
void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  small_gemm_dispatch(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  small_gemm_dispatch(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

} // namespace headgrad::kernels
