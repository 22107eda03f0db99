// blas_core.hpp - the start-up choice of OpenBLAS kernel and OpenMP wait policy for the programs
// (headgrad, headgrad_bench), and the CPU features it is made from. (The thread setting the
// library itself uses is framework/runtime/threads.hpp.)
#pragma once
#include <string>

namespace headgrad::cli {

struct CpuFeatures {
  bool sse3, avx, avx2, fma, avx512f, avx512bw, avx512vl, avx512dq;
  std::string str() const; // "sse3 avx avx2 fma ..."
};
CpuFeatures cpu_features();

// Settings that libraries read only when they load, so they need one re-exec (never more):
// - OpenBLAS picks its kernel at load. If it fell back to a generic core (e.g. Prescott) on a
//   CPU that has AVX-512 or AVX2, and the user has not set OPENBLAS_CORETYPE, the program is
//   re-executed with OPENBLAS_CORETYPE set to the matching kernel (SkylakeX or Haswell);
//   HEADGRAD_BLAS_AUTOCORE=0 disables this. (HEADGRAD_BLAS_AUTOCORE_ASSUME=CORE makes the
//   decision as if OpenBLAS had picked CORE: how the tests reach this path on a CPU where
//   OpenBLAS does not fall back.)
// - OMP_WAIT_POLICY=PASSIVE when unset: idle OpenMP threads sleep instead of spinning on cores
//   that other processes (a second training, the test suite) need. Library users who call ops
//   directly get libgomp's default unless they set it.
// Never overrides a value the user set. Returns normally when nothing is to be done; on
// re-exec it does not return.
void maybe_reexec_with_better_blas_core(int argc, char** argv);
// The one line to print at start-up if the kernel was chosen for the user ("" otherwise).
std::string blas_core_notice();
// The kernel a fallback core should be replaced with on this CPU ("" if none is needed).
std::string preferred_core(const std::string& active_core, const CpuFeatures& cpu);

} // namespace headgrad::cli
