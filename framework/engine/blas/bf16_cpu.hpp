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

// Whether bf16 can be expected to run faster than float32 here. With AMX (oneDNN's
// avx512_core_amx), yes. Without it, the bf16 gemm is bounded by AVX-512 BF16's dot product
// (VDPBF16PS: 16 lanes x 2 products per instruction, 64 FLOPs) and the float32 one by FMA
// (VFMADD231PS: 16 lanes, 32 FLOPs): on AMD Zen 4 the dot product issues as often as the FMA (2x
// the FLOPs), on the Intel Xeons measured here half as often (the same FLOPs at best, and the
// gemm falls short of it). Which one a CPU is, is measured: each instruction timed in a loop of
// independent chains on this thread, best of several short rounds (well under a millisecond in
// all), once per process. The result only decides a note, never what runs.
struct Bf16Speed {
  double bf16_gflops = 0; // VDPBF16PS peak of one thread, FLOPs counted as 2 per product
  double f32_gflops = 0;  // VFMADD231PS peak of one thread
  bool amx = false;       // oneDNN runs AMX here
  double ratio() const { return f32_gflops > 0 ? bf16_gflops / f32_gflops : 0; }
  bool slower_than_f32() const { return !amx && ratio() < 1.0; }
};
// Zeros when the CPU has no avx512_bf16 (or HEADGRAD_BF16_ASSUME_MISSING=1).
Bf16Speed bf16_speed();
// "" when bf16 may be faster than float32 here (or is not available at all); otherwise the note,
// e.g. "this CPU shows no AMX, and its bf16 dot products reach 0.49x the float32 FMA rate: bf16
// gemms run slower than float32 ones here (bf16 still trains, at float32's accuracy less rounding)".
std::string bf16_slow_note();

// For `headgrad info` and the benchmark: "oneDNN 2.6.3, ISA avx512_core_bf16 (no AMX visible)".
std::string onednn_summary();
// "available (...)" or "not available: <bf16_missing()>", and the speed ratio when measured.
std::string bf16_summary();

} // namespace headgrad::blas
