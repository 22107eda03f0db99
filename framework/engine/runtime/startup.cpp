#include "framework/engine/runtime/startup.hpp"

#include <atomic>
#include <cblas.h>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <mutex>
#include <omp.h>
#include <set>
#include <unistd.h>

#include "framework/engine/runtime/threads.hpp"

namespace headgrad::runtime {
namespace {

std::atomic<bool> g_configured{false};
std::atomic<bool> g_kernel_noted{false};

// A variable counts as set when it holds something: OPENBLAS_CORETYPE= (empty) is unset to us.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
bool env_is(const char* name, const char* value) {
  const char* v = env(name);
  return v && std::string(v) == value;
}

// The re-executed process is the same process (execv keeps the pid): the guard holds our pid, so
// a program this one starts later (a child has another pid) still makes its own choice.
constexpr const char* kReexecGuard = "HEADGRAD_REEXECED";
bool reexecuted_already() {
  const char* g = env(kReexecGuard);
  return g && std::string(g) == std::to_string(getpid());
}

// How much slower OpenBLAS's generic kernels run gemms than the kernel `want` (measured on an
// Intel Xeon with AVX-512, sgemm 768x512x128 at one thread: Prescott 38 GFLOP/s, Haswell 100,
// SkylakeX 147).
const char* slowdown_class(const std::string& want) { return want == "SkylakeX" ? "about 4x" : "about 2.5x"; }

// What a program that chose not to re-execute goes without, in one line.
std::string no_reexec_note(bool passive, const std::string& active, const std::string& want) {
  std::string costs, set;
  if (!want.empty()) {
    costs = fmt::format("OpenBLAS keeps its generic {} kernel ({} slower gemms than {})", active, slowdown_class(want), want);
    set = fmt::format("OPENBLAS_CORETYPE={}", want);
  }
  if (passive) {
    costs += fmt::format("{}idle OpenMP threads spin on their cores", costs.empty() ? "" : "; ");
    set += fmt::format("{}OMP_WAIT_POLICY=PASSIVE", set.empty() ? "" : " ");
  }
  return fmt::format("headgrad: note: runtime::configure without re-executing: {} (set {} before the program "
                     "starts to have it all)",
                     costs, set);
}

} // namespace

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

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) break;
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "";
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

std::string wider_core(const std::string& core, const CpuFeatures& cpu) {
  if (std::string fallback = preferred_core(core, cpu); !fallback.empty()) return fallback;
  const bool avx512 = cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq;
  return avx512 && (core == "Haswell" || core == "Zen") ? "SkylakeX" : "";
}

std::string active_core() {
  const char* assume = env("HEADGRAD_BLAS_AUTOCORE_ASSUME");
  // The hook decides as if OpenBLAS had fallen back to `assume` - unless the kernel was already
  // replaced (by this process's configure(), or by the parent that started it).
  if (assume && (!env("OPENBLAS_CORETYPE") || env_is("OPENBLAS_CORETYPE", assume))) return assume;
  return openblas_get_corename();
}

bool user_chose_core() {
  const char* core = env("OPENBLAS_CORETYPE");
  const char* assume = env("HEADGRAD_BLAS_AUTOCORE_ASSUME");
  return core && !(assume && std::string(core) == assume);
}

void configure(int /*argc*/, char** argv, StartupOptions options) {
  if (g_configured.exchange(true)) return;
  if (reexecuted_already()) return; // the settings below are this process's already
  // The wait policy matters only where OpenMP has threads to park: with one, nothing waits.
  const bool passive = !env("OMP_WAIT_POLICY") && omp_get_max_threads() > 1;
  std::string active, want;
  if (!user_chose_core() && !env_is("HEADGRAD_BLAS_AUTOCORE", "0")) {
    active = active_core();
    want = preferred_core(active, cpu_features());
  }
  if (!passive && want.empty()) return;
  if (!options.reexec || env_is("HEADGRAD_REEXEC", "0")) {
    std::fprintf(stderr, "%s\n", no_reexec_note(passive, active, want).c_str());
    return;
  }
  if (passive) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  if (!want.empty()) {
    setenv("OPENBLAS_CORETYPE", want.c_str(), 1);
    setenv("HEADGRAD_BLAS_AUTOCORE_FROM", active.c_str(), 1);
  }
  setenv(kReexecGuard, std::to_string(getpid()).c_str(), 1);
  // The new program starts with this thread's CPU mask. Under OMP_PROC_BIND, libgomp has narrowed
  // it to its first place (threads.hpp), and the new program's OpenMP would see that place alone.
  if (openmp_binds_threads()) bind_this_thread(openmp_place_cpus());
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on as we are, correct and possibly slower; the environment
  // still says what a child process should run
}

bool configured() { return g_configured.load(); }

std::string startup_notice() {
  const char* from = env("HEADGRAD_BLAS_AUTOCORE_FROM");
  if (!from || !configured()) return "";
  return fmt::format("headgrad: note: OpenBLAS fell back to its {} kernel on this CPU; using {} instead "
                     "(set OPENBLAS_CORETYPE to choose, HEADGRAD_BLAS_AUTOCORE=0 to keep the fallback)",
                     from, openblas_get_corename());
}

std::string fallback_kernel_warning() {
  if (configured() || user_chose_core() || env_is("HEADGRAD_BLAS_AUTOCORE", "0")) return "";
  const std::string active = active_core();
  const std::string want = preferred_core(active, cpu_features());
  if (want.empty()) return "";
  return fmt::format("headgrad: note: OpenBLAS runs its generic {} kernel on this CPU, which supports {}: {} slower "
                     "gemms. Set OPENBLAS_CORETYPE={}, or call headgrad::runtime::configure(argc, argv) first in "
                     "main() (HEADGRAD_BLAS_AUTOCORE=0 silences this)",
                     active, want, slowdown_class(want), want);
}

void note_blas_kernel_once() {
  if (g_kernel_noted.load(std::memory_order_relaxed)) return;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string line = fallback_kernel_warning();
    if (!line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
    g_kernel_noted.store(true);
  });
}

} // namespace headgrad::runtime
