#include "framework/kernels/gemm_batched.hpp"

#include <omp.h>

namespace headgrad::kernels {

namespace {
// Below this m*n*k (e.g. 32 x 32 x 32) a gemm is call overhead more than arithmetic, and the
// batch gained nothing from threads when measured (256 gemms of 16 x 16 x 16: 0.15 ms serial,
// 0.19 ms over 2 threads).
constexpr std::int64_t kMinParallelMNK = 32 * 32 * 32;
} // namespace

bool batch_in_parallel(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k, bool distinct_outputs) {
  return distinct_outputs && count > 1 && m * n * k >= kMinParallelMNK && omp_get_max_threads() > 1 &&
         !omp_in_parallel();
}

void run_batch_parallel(std::int64_t count, void (*fn)(void* ctx, std::int64_t i), void* ctx) {
  const int blas_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) fn(ctx, i);
  openblas_set_num_threads(blas_threads);
}

} // namespace headgrad::kernels
