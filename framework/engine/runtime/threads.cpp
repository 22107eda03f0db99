#include "framework/engine/runtime/threads.hpp"

#include <algorithm>
#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <set>
#include <unistd.h>

namespace headgrad::runtime {

void set_threads(int n) {
  if (n < 1) n = 1;
  // BLAS itself stays on one thread: engine::gemm splits every gemm worth splitting over the
  // OpenMP threads (one single-threaded BLAS call per block), so OpenBLAS's own pool, whose idle
  // threads spin on the cores for ~0.1 s after each call, is never woken.
  openblas_set_num_threads(1);
  omp_set_num_threads(n);
}

std::vector<int> openmp_place_cpus() {
  std::set<int> cpus;
  for (int p = 0, places = omp_get_num_places(); p < places; ++p) {
    std::vector<int> ids(static_cast<std::size_t>(std::max(0, omp_get_place_num_procs(p))));
    omp_get_place_proc_ids(p, ids.data());
    cpus.insert(ids.begin(), ids.end());
  }
  return {cpus.begin(), cpus.end()};
}

bool openmp_binds_threads() { return omp_get_proc_bind() != omp_proc_bind_false && omp_get_num_places() > 0; }

int available_cores() {
  // (under binding the calling thread's own mask is the first place's alone: threads.hpp)
  const std::vector<int> cpus = openmp_binds_threads() ? openmp_place_cpus() : this_thread_cpus();
  if (!cpus.empty()) return static_cast<int>(cpus.size());
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<int> this_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool bind_this_thread(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return CPU_COUNT(&set) > 0 && pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

std::vector<std::vector<int>> openmp_team_cpus(int n) {
  std::vector<std::vector<int>> cpus(static_cast<std::size_t>(std::max(0, n)));
  if (n < 1 || !openmp_binds_threads()) return cpus;
  // OpenMP binds a team's threads as the team forms: ask each thread of a team of n where it sits.
#pragma omp parallel num_threads(n)
  {
    const int t = omp_get_thread_num();
    if (t < n) cpus[static_cast<std::size_t>(t)] = this_thread_cpus();
  }
  const std::vector<int> all = openmp_place_cpus(); // for a thread OpenMP did not start (a thread limit, nesting)
  for (auto& c : cpus)
    if (c.empty()) c = all;
  return cpus;
}

std::string openmp_binding() {
  if (!openmp_binds_threads()) return "off";
  const char* policy = "true";
  // (2 is OpenMP 5.1's omp_proc_bind_primary, "master" before it: GCC's omp.h and LLVM's, which the
  // fuzz build compiles with, name it differently)
  switch (static_cast<int>(omp_get_proc_bind())) {
  case 2: policy = "primary"; break;
  case omp_proc_bind_close: policy = "close"; break;
  case omp_proc_bind_spread: policy = "spread"; break;
  default: break;
  }
  return fmt::format("{}, {} places", policy, omp_get_num_places());
}

BlasInfo blas_info() {
  return BlasInfo{openblas_get_config(), openblas_get_corename(), openblas_get_num_threads(), omp_get_max_threads(),
                  available_cores()};
}

} // namespace headgrad::runtime
