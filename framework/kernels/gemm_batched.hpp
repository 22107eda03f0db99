// gemm_batched.hpp - many independent small gemms (attention's per-head products), spread over
// the OpenMP threads with each gemm single-threaded.
//
// Why: OpenBLAS threads every call whose m*n*k exceeds a small threshold, so a (128 x 128 x 32)
// head product runs on 2 threads with a hand-off and join per call: 23 GFLOP/s measured for 128
// such calls on 2 cores. Running whole gemms per thread instead (BLAS set to one thread for the
// duration) measured 71 GFLOP/s on the same shapes. Tiny gemms (attention at T = 16) gain nothing
// either way and stay on the calling thread.
#pragma once
#include <cstdint>
#include <vector>

#include "framework/kernels/gemm.hpp"

namespace headgrad::kernels {

// One gemm of the batch: element offsets of its A, B and C.
struct BatchOffsets {
  std::int64_t a, b, c;
};

// True when the batch should be split over threads: more than one gemm, more than one thread,
// not already inside a parallel region, and each gemm big enough to amortise a thread's work.
// `distinct_outputs`: no two gemms write the same C (a broadcast gradient accumulates several
// gemms into one C and must stay serial).
bool batch_in_parallel(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k, bool distinct_outputs);

// Runs fn(i) for i in [0, count) on the OpenMP threads with BLAS limited to one thread meanwhile
// (restored afterwards, also if fn throws - it must not: gemm does not).
void run_batch_parallel(std::int64_t count, void (*fn)(void* ctx, std::int64_t i), void* ctx);

// C_i = alpha op(A_i) op(B_i) + beta C_i for every offset triple.
template <typename T>
void gemm_batched(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                  std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc,
                  const std::vector<BatchOffsets>& offsets, bool distinct_outputs) {
  const auto count = static_cast<std::int64_t>(offsets.size());
  auto one = [&](std::int64_t i) {
    const BatchOffsets& o = offsets[static_cast<std::size_t>(i)];
    gemm(ta, tb, m, n, k, alpha, a + o.a, lda, b + o.b, ldb, beta, c + o.c, ldc);
  };
  if (!batch_in_parallel(count, m, n, k, distinct_outputs)) {
    for (std::int64_t i = 0; i < count; ++i) one(i);
    return;
  }
  run_batch_parallel(
      count, [](void* ctx, std::int64_t i) { (*static_cast<decltype(one)*>(ctx))(i); }, &one);
}

} // namespace headgrad::kernels
