// bf16_cpu.hpp - whether this CPU can run the bf16 gemm, and if not, what it lacks.
//
// oneDNN's bf16 matmul needs one of two instruction set extensions: AVX-512 BF16 (VDPBF16PS, a
// dot product of bf16 pairs accumulated in float32: AMD Zen 4, Intel Cooper Lake and later
// Xeons) or AMX-BF16 (tile multiplies: Intel Sapphire Rapids and later Xeons). Without them oneDNN
// 2.6 has no bf16 matmul at all (creating one fails), so a bf16 run is refused up front with one
// line naming what is missing.
//
// Test hook: HEADGRAD_BF16_ASSUME_MISSING=1 makes this process answer as on a CPU without either
// extension (the refusal is tested on CPUs that have them).
#pragma once
#include <string>

namespace headgrad::blas {

struct Bf16Cpu {
  bool avx512_bf16 = false; // the CPU's flags (cpuid), named as /proc/cpuinfo names them
  bool amx_bf16 = false;
  std::string onednn_isa;   // the instruction set oneDNN runs here ("avx512_core_bf16", ...)
  bool onednn_bf16 = false; // whether that one has a bf16 matmul (it also needs the OS to save the registers)
};
Bf16Cpu bf16_cpu();

// "" when the bf16 gemm runs here; otherwise one line saying what is missing, e.g. "this CPU has
// no avx512_bf16 or amx_bf16: bf16 training needs one of them".
std::string bf16_missing();
inline bool bf16_supported() { return bf16_missing().empty(); }

} // namespace headgrad::blas
