// threads.hpp - the threads all of headgrad's compute runs on, and the BLAS it calls: one setting
// shared by BLAS and OpenMP, the cores this process may use, and what OpenBLAS reports about itself.
#pragma once
#include <string>

namespace headgrad::runtime {

// Sets the threads for all of our compute (n >= 1): n OpenMP threads, which also run the blocks
// of every split gemm (kernels/gemm.hpp); BLAS itself is set to one thread, so the two pools
// never oversubscribe the cores.
void set_threads(int n);
// Logical CPUs available to this process (its affinity mask).
int available_cores();

struct BlasInfo {
  std::string config;   // openblas_get_config(): version and build options
  std::string core;     // openblas_get_corename(): the active kernel set
  int blas_threads;
  int omp_threads;
  int cores;            // available_cores()
};
BlasInfo blas_info();

} // namespace headgrad::runtime
