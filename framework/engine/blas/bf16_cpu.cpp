#include "framework/engine/blas/bf16_cpu.hpp"

#include <cstdlib>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
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

} // namespace

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

} // namespace headgrad::blas
