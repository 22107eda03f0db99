// threads.hpp - the threads all of headgrad's compute runs on, and the BLAS it calls: one setting
// shared by BLAS and OpenMP, the cores this process may use, and what OpenBLAS reports about itself.
#pragma once
#include <string>
#include <vector>

namespace headgrad::runtime {

// Sets the threads for all of our compute (n >= 1): n OpenMP threads, which also run the blocks
// of every split gemm (kernels/gemm.hpp); BLAS itself is set to one thread, so the two pools
// never oversubscribe the cores.
void set_threads(int n);
// Logical CPUs available to this process: its affinity mask, or, when OpenMP binds its threads,
// the CPUs of all of OpenMP's places (see openmp_binds_threads).
int available_cores();

// Whether OpenMP binds its threads to places (OMP_PROC_BIND other than false, or OMP_PLACES set
// alone). libgomp then binds the initial thread to the first place while the program starts, so
// that thread's own affinity mask holds one place's CPUs, not the process's.
bool openmp_binds_threads();
// Every CPU of OpenMP's places, in order (empty when it has none).
std::vector<int> openmp_place_cpus();
// The CPUs (by number) the calling thread may run on, and setting them (false: the system refused).
std::vector<int> this_thread_cpus();
bool bind_this_thread(const std::vector<int>& cpus);
// The CPUs OpenMP binds thread i of a team of n to, for each i < n; all empty when it binds none.
// Threads of our own (runtime::SpinPool) take them on: a std::thread starts with its creator's
// mask, which under binding is the first place alone, and n threads would share its CPUs.
std::vector<std::vector<int>> openmp_team_cpus(int n);
// How OpenMP binds, for `headgrad info`: "off", or the policy and the places ("close, 2 places").
std::string openmp_binding();

struct BlasInfo {
  std::string config;   // openblas_get_config(): version and build options
  std::string core;     // openblas_get_corename(): the active kernel set
  int blas_threads;
  int omp_threads;
  int cores;            // available_cores()
};
BlasInfo blas_info();

} // namespace headgrad::runtime
