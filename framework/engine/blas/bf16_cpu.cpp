#include "framework/engine/blas/bf16_cpu.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HEADGRAD_BF16_TIMING 1
#endif

namespace headgrad::blas {
namespace {

bool assume_missing() {
  const char* v = std::getenv("HEADGRAD_BF16_ASSUME_MISSING");
  return v && std::string(v) == "1";
}

const char* onednn_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
  case dnnl_cpu_isa_sse41: return "sse41";
  case dnnl_cpu_isa_avx: return "avx";
  case dnnl_cpu_isa_avx2: return "avx2";
  case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
  case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
  case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
  case dnnl_cpu_isa_avx512_core: return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
  default: return "no vector extension";
  }
}

#if HEADGRAD_BF16_TIMING
constexpr int kChains = 12;     // independent accumulators: more than latency x ports of either instruction
constexpr int kRepeats = 4096;  // loop trips per timing (49k instructions, ~20 us)

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One VDPBF16PS: acc plus the dot products of x's and y's bf16 pairs (1 and 2^-7).
struct Dpbf16 {
  __attribute__((target("avx512f,avx512bf16"))) __m512 operator()(__m512 acc) const {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi16(0x3f80), (__m512bh)_mm512_set1_epi16(0x3c00));
  }
};
// One VFMADD231PS: acc plus x * y (1 and 2^-7).
struct Fma {
  __attribute__((target("avx512f,fma"))) __m512 operator()(__m512 acc) const {
    return _mm512_fmadd_ps(_mm512_set1_ps(1.0f), _mm512_set1_ps(0x1p-7f), acc);
  }
};

// Seconds for kRepeats x kChains instructions `step`, on kChains independent accumulators.
template <typename Step> __attribute__((target("avx512f,avx512bf16,fma"), noinline)) double time_chains(Step step) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < kRepeats; ++r)
    for (auto& a : acc) a = step(a);
  const double t = seconds_since(t0);
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  volatile float keep = lanes[0]; // the loop is not dead code
  (void)keep;
  return t;
}

Bf16Speed measure_speed() {
  Bf16Speed out;
  double t_bf16 = 1e30, t_f32 = 1e30;
  for (int round = 0; round < 15; ++round) { // interleaved, best of each: a busy moment only slows one down
    t_bf16 = std::min(t_bf16, time_chains(Dpbf16{}));
    t_f32 = std::min(t_f32, time_chains(Fma{}));
  }
  const double instructions = double(kRepeats) * kChains;
  out.bf16_gflops = instructions * 64 / t_bf16 * 1e-9;
  out.f32_gflops = instructions * 32 / t_f32 * 1e-9;
  return out;
}
#endif

} // namespace

Bf16Speed bf16_speed() {
  static const Bf16Speed speed = [] {
    Bf16Speed s;
    const Bf16Cpu cpu = bf16_cpu();
#if HEADGRAD_BF16_TIMING
    if (cpu.avx512_bf16 && cpu.onednn_bf16) s = measure_speed();
#endif
    s.amx = cpu.onednn_isa == "avx512_core_amx";
    return s;
  }();
  return speed;
}

std::string bf16_slow_note() {
  if (!bf16_supported()) return "";
  const Bf16Speed s = bf16_speed();
  if (!s.slower_than_f32()) return "";
  return fmt::format("this CPU shows no AMX, and its bf16 dot products reach {:.2f}x the float32 FMA rate ({:.0f} "
                     "against {:.0f} GFLOP/s on one thread): bf16 gemms run slower than float32 ones here",
                     s.ratio(), s.bf16_gflops, s.f32_gflops);
}

Bf16Cpu bf16_cpu() {
  Bf16Cpu out;
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    out.amx_bf16 = (d >> 22) & 1u; // CPUID.(EAX=7,ECX=0):EDX[22] (Intel SDM, vol. 2A, CPUID)
    const unsigned subleaves = a;
    if (subleaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      out.avx512_bf16 = (a >> 5) & 1u; // CPUID.(EAX=7,ECX=1):EAX[5]
    }
  }
#endif
  // The ISA oneDNN dispatches to: the CPU's, less what the OS does not enable and what
  // DNNL_MAX_CPU_ISA excludes. Its values are bit sets, each containing the ones below it.
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  out.onednn_isa = onednn_isa_name(isa);
  out.onednn_bf16 = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
  if (assume_missing()) out.avx512_bf16 = out.amx_bf16 = out.onednn_bf16 = false;
  return out;
}

std::string bf16_missing() {
  const Bf16Cpu cpu = bf16_cpu();
  if (!cpu.avx512_bf16 && !cpu.amx_bf16) return "this CPU has no avx512_bf16 or amx_bf16: bf16 training needs one of them";
  if (!cpu.onednn_bf16)
    return fmt::format("oneDNN runs {} here (limited by DNNL_MAX_CPU_ISA or the OS), which has no bf16 matmul: bf16 "
                       "training needs avx512_core_bf16 or avx512_core_amx",
                       cpu.onednn_isa);
  return "";
}

std::string onednn_summary() {
  const dnnl_version_t* v = dnnl_version();
  const Bf16Cpu cpu = bf16_cpu();
  return fmt::format("oneDNN {}.{}.{}, ISA {} ({})", v->major, v->minor, v->patch, cpu.onednn_isa,
                     cpu.onednn_isa == "avx512_core_amx" ? "AMX" : cpu.amx_bf16 ? "amx_bf16 in cpuid, not used"
                                                                                 : "no AMX visible");
}

std::string bf16_summary() {
  if (const std::string missing = bf16_missing(); !missing.empty()) return "not available: " + missing;
  const Bf16Speed s = bf16_speed();
  std::string out = "available (--precision bf16, runtime::Autocast: oneDNN's matmul, bf16 inputs, float32 sums)";
  if (s.f32_gflops > 0)
    out += fmt::format("; one thread's peak: bf16 dot products {:.0f}, float32 FMA {:.0f} GFLOP/s ({:.2f}x){}",
                       s.bf16_gflops, s.f32_gflops, s.ratio(), s.slower_than_f32() ? ": slower than float32 here" : "");
  return out;
}

} // namespace headgrad::blas
