// gemm_threads.cpp - the threading decisions of gemm.hpp and gemm_batched.hpp.
#include <algorithm>
#include <omp.h>

#include "framework/engine/kernels/gemm_batched.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN // also built per instruction set, for attention's copies (isa_namespace.hpp)

namespace {
// Below this m*n*k a gemm is call overhead more than arithmetic: 256 gemms of 16 x 16 x 16 took
// 0.15 ms in a loop and 0.19 ms spread over 2 threads.
constexpr std::int64_t kMinParallelMNK = 32 * 32 * 32;
// Each block of a split gemm keeps at least this many rows (or columns) of C.
constexpr std::int64_t kMinBlock = 16;

bool threads_available() { return omp_get_max_threads() > 1 && !omp_in_parallel(); }
} // namespace

int gemm_split_parts(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m * n * std::max<std::int64_t>(k, 1) < kMinParallelMNK || !threads_available()) return 1;
  const std::int64_t len = std::max(m, n);
  return static_cast<int>(std::clamp<std::int64_t>(len / kMinBlock, 1, omp_get_max_threads()));
}

bool batch_in_parallel(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k, bool distinct_outputs) {
  return distinct_outputs && count > 1 && m * n * k >= kMinParallelMNK && threads_available();
}

bool small_batch_in_parallel(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k,
                             bool distinct_outputs) {
  // a thread hand-off is worth ~2^16 multiply-adds of work
  return distinct_outputs && count > 1 && count * m * n * k >= (std::int64_t{1} << 16) && threads_available();
}

void run_blas_parallel(std::int64_t count, void (*fn)(void* ctx, std::int64_t i), void* ctx) {
  const int blas_threads = openblas_get_num_threads();
  if (blas_threads != 1) openblas_set_num_threads(1);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) fn(ctx, i);
  if (blas_threads != 1) openblas_set_num_threads(blas_threads);
}

HEADGRAD_ISA_END
} // namespace headgrad::engine
