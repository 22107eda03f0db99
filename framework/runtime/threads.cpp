#include "framework/runtime/threads.hpp"

#include <algorithm>
#include <cblas.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

namespace headgrad::runtime {

void set_threads(int n) {
  if (n < 1) n = 1;
  // BLAS itself stays on one thread: kernels::gemm splits every gemm worth splitting over the
  // OpenMP threads (one single-threaded BLAS call per block), so OpenBLAS's own pool, whose idle
  // threads spin on the cores for ~0.1 s after each call, is never woken.
  openblas_set_num_threads(1);
  omp_set_num_threads(n);
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

BlasInfo blas_info() {
  return BlasInfo{openblas_get_config(), openblas_get_corename(), openblas_get_num_threads(), omp_get_max_threads(),
                  available_cores()};
}

} // namespace headgrad::runtime
