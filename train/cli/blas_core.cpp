#include "train/cli/blas_core.hpp"

#include <cblas.h>
#include <cstdlib>
#include <fmt/format.h>
#include <set>
#include <unistd.h>

namespace headgrad::cli {

CpuFeatures cpu_features() {
  __builtin_cpu_init();
  return CpuFeatures{__builtin_cpu_supports("sse3") != 0,     __builtin_cpu_supports("avx") != 0,
                     __builtin_cpu_supports("avx2") != 0,     __builtin_cpu_supports("fma") != 0,
                     __builtin_cpu_supports("avx512f") != 0,  __builtin_cpu_supports("avx512bw") != 0,
                     __builtin_cpu_supports("avx512vl") != 0, __builtin_cpu_supports("avx512dq") != 0};
}

std::string CpuFeatures::str() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += s.empty() ? name : std::string(" ") + name;
  };
  add(sse3, "sse3");
  add(avx, "avx");
  add(avx2, "avx2");
  add(fma, "fma");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  return s;
}

std::string preferred_core(const std::string& active, const CpuFeatures& cpu) {
  // OpenBLAS's generic x86-64 fallbacks: cores without AVX2 kernels.
  static const std::set<std::string> fallback = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                                 "Katmai",   "Coppermine", "Northwood", "Banias", "Atom",
                                                 "Opteron",  "Opteron_SSE3", "Barcelona", "Bobcat", "Sandybridge"};
  if (!fallback.count(active)) return "";
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return "Haswell";
  return "";
}

void maybe_reexec_with_better_blas_core(int /*argc*/, char** argv) {
  if (std::getenv("HEADGRAD_REEXECED")) return; // already re-executed once
  bool change = false;
  // Idle OpenMP threads sleep instead of spinning. Alone on the machine, libgomp's spinning
  // default is at most ~10% faster (no futex wake-up at each of a step's ~60 parallel regions);
  // with anything else on the cores it is a disaster: two default-model trainings side by side on
  // 2 cores ran 39-41 ms/step each with the default and 14-16 ms/step with PASSIVE (9-10 ms
  // alone). libgomp reads the policy only at start-up, hence the re-exec. A value the user set
  // stands.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    change = true;
  }
  const char* off = std::getenv("HEADGRAD_BLAS_AUTOCORE");
  if (!std::getenv("OPENBLAS_CORETYPE") && !(off && std::string(off) == "0")) {
    // HEADGRAD_BLAS_AUTOCORE_ASSUME: test hook, decide as if OpenBLAS had picked this core
    const char* assume = std::getenv("HEADGRAD_BLAS_AUTOCORE_ASSUME");
    const std::string active = assume ? assume : openblas_get_corename();
    const std::string want = preferred_core(active, cpu_features());
    if (!want.empty()) {
      setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
      setenv("HEADGRAD_BLAS_AUTOCORE_FROM", active.c_str(), 1);
      change = true;
    }
  }
  if (!change) return;
  setenv("HEADGRAD_REEXECED", "1", 1);
  execv("/proc/self/exe", argv);
  // exec failed: carry on as we are (correct, possibly slower)
}

std::string blas_core_notice() {
  const char* from = std::getenv("HEADGRAD_BLAS_AUTOCORE_FROM");
  if (!from) return "";
  return fmt::format("headgrad: OpenBLAS fell back to its {} kernel on this CPU; using {} instead "
                     "(set OPENBLAS_CORETYPE to choose, HEADGRAD_BLAS_AUTOCORE=0 to keep the fallback)",
                     from, openblas_get_corename());
}

} // namespace headgrad::cli
