// gemm_batched.hpp - many independent gemms of one shape (attention's per-head products).
//
// Tiny gemms (every side <= 32, attention at T = 16) run in small_gemm.hpp's loop kernel instead of
// BLAS, spread over the threads when the whole batch is big enough.
// Big enough gemms with distinct outputs run whole, one per OpenMP thread (each single-threaded):
// 128 gemms of 128 x 128 x 32 measured 71 GFLOP/s that way on 2 cores against 23 GFLOP/s as a
// loop of 2-thread BLAS calls. A batch whose gemms share an output (a broadcast operand's
// gradient) runs in order, each gemm split over the threads by gemm() itself.
#pragma once
#include <cstdint>

#include "framework/engine/kernels/gemm.hpp"
#include "framework/engine/kernels/isa_namespace.hpp"
#include "framework/engine/kernels/small_gemm.hpp"

namespace headgrad::engine {

// One gemm of a batch: element offsets of its A, B and C.
struct BatchOffsets {
  std::int64_t a, b, c;
};

HEADGRAD_ISA_BEGIN

// True when the batch should be spread over threads: more than one gemm, more than one thread,
// not already inside a parallel region, each gemm big enough to be worth a thread, and
// `distinct_outputs` (no two gemms write the same C).
bool batch_in_parallel(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k, bool distinct_outputs);
// The same for a batch of tiny gemms (small_gemm): worth threads once the whole batch is.
bool small_batch_in_parallel(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k,
                             bool distinct_outputs);

// C_i = alpha op(A_i) op(B_i) + beta C_i for each of the `count` offset triples.
template <typename T>
void gemm_batched(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                  std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc,
                  const BatchOffsets* offsets, std::int64_t count, bool distinct_outputs) {
  const bool tiny = m <= kSmallGemmMax && n <= kSmallGemmMax && k <= kSmallGemmMax;
  const bool parallel = tiny ? small_batch_in_parallel(count, m, n, k, distinct_outputs)
                             : batch_in_parallel(count, m, n, k, distinct_outputs);
  auto one = [&](std::int64_t i) {
    const BatchOffsets& o = offsets[i];
    if (tiny) small_gemm(ta, tb, m, n, k, alpha, a + o.a, lda, b + o.b, ldb, beta, c + o.c, ldc);
    else if (parallel) blas_gemm(ta, tb, m, n, k, alpha, a + o.a, lda, b + o.b, ldb, beta, c + o.c, ldc); // whole
    else gemm(ta, tb, m, n, k, alpha, a + o.a, lda, b + o.b, ldb, beta, c + o.c, ldc); // may split itself
  };
  if (parallel)
    run_blas_parallel(count, [](void* ctx, std::int64_t i) { (*static_cast<decltype(one)*>(ctx))(i); }, &one);
  else
    for (std::int64_t i = 0; i < count; ++i) one(i);
}

HEADGRAD_ISA_END
} // namespace headgrad::engine
