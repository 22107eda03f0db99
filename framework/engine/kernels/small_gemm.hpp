// small_gemm.hpp - gemm for tiny matrices (every side <= 32), where a BLAS call costs more in
// set-up than in arithmetic: attention's per-head products at T = 16, d_head = 16 are 256 gemms
// of 16 x 16 x 16 per call, ~0.6 us each through cblas_sgemm.
#pragma once
#include <cstdint>

#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

inline constexpr std::int64_t kSmallGemmMax = 32;

// C = alpha op(A) op(B) + beta C (beta == 0: C is not read), row-major, m, n, k <= kSmallGemmMax.
// Each C element is one dot product summed in order of k, like the plain definition.
void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc);

HEADGRAD_ISA_END
} // namespace headgrad::engine
