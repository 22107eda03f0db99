// startup.hpp - the start-up path every program takes first thing in main(): the OpenBLAS kernel
// for this CPU and the OpenMP wait policy. Both are settings that their libraries read only once,
// when they load, so applying them costs one re-execution of the program (never more; never where
// nothing changes; never with StartupOptions{.reexec = false}).
//
//   int main(int argc, char** argv) {
//     headgrad::runtime::configure(argc, argv); // before any thread, MPI or BLAS call
//     ...
//   }
//
// What configure() chooses, only where the user left the choice open:
// - OpenBLAS's kernel. OpenBLAS 0.3.21 picks its kernel from the CPU model, and on a model it does
//   not know (recent Intel Xeons among them) it falls back to a generic SSE3 kernel such as
//   Prescott, whose gemms are about 3-4x slower than the CPU's own (measured on one Intel Xeon
//   with AVX-512, sgemm 768x512x128 at one thread: Prescott 38 GFLOP/s, Haswell 100, SkylakeX 147).
//   Then OPENBLAS_CORETYPE is set to the kernel this CPU supports (SkylakeX with AVX-512, Haswell
//   with AVX2 + FMA). A value of OPENBLAS_CORETYPE the user set always stands;
//   HEADGRAD_BLAS_AUTOCORE=0 keeps OpenBLAS's own choice.
// - OMP_WAIT_POLICY=PASSIVE when unset and OpenMP runs more than one thread: idle OpenMP threads
//   sleep instead of spinning on cores that other processes need (two trainings sharing 2 cores
//   ran 2.5x slower each with libgomp's spinning default; alone, spinning is at most ~10% faster).
//
// A program that does not call configure() and runs one of OpenBLAS's fallback kernels on a CPU
// with a better one is told so on stderr, once, at its first gemm (note_blas_kernel_once).
//
// Test hook: HEADGRAD_BLAS_AUTOCORE_ASSUME=CORE makes this process decide as on a CPU where
// OpenBLAS falls back to CORE by itself. An OPENBLAS_CORETYPE equal to CORE then counts as that
// fallback, not as the user's choice: a test sets both to make the programs that skip configure()
// really run CORE while configure() replaces it, as on such a CPU.
#pragma once
#include <string>

namespace headgrad::runtime {

// The vector extensions that decide which kernels a CPU can run.
struct CpuFeatures {
  bool sse3, avx, avx2, fma, avx512f, avx512bw, avx512vl, avx512dq;
  std::string str() const; // "sse3 avx avx2 fma ..."
};
CpuFeatures cpu_features();
// /proc/cpuinfo's "model name" of the first CPU ("" where there is none).
std::string cpu_model();

// How configure() may apply what it chose.
struct StartupOptions {
  // Re-execute the program (/proc/self/exe with the same argv) when a setting changed, the only
  // way to apply it: the code before configure() then runs twice, and stdout not yet flushed is
  // lost. false (or HEADGRAD_REEXEC=0 in the environment): never; configure() then changes nothing
  // and prints one line on stderr saying what the program goes without and what to set instead
  // ("headgrad: note: runtime::configure without re-executing: OpenBLAS keeps its generic Prescott
  // kernel (about 4x slower gemms than SkylakeX); idle OpenMP threads spin on their cores (set
  // ...)"), nothing when there was nothing to change.
  bool reexec = true;
};
// Chooses the BLAS kernel and the OpenMP wait policy (see above) and re-executes the program when
// one of them changed, only where it matters: the kernel when OpenBLAS fell back to a slower one
// than this CPU runs, the wait policy when it is unset and OpenMP has more than one thread (with
// one, no thread waits). Returns normally when there is nothing to change, when it already ran
// once in this process, or without re-executing (options.reexec). argv must be main's argv.
void configure(int argc, char** argv, StartupOptions options = {});
// Whether configure() ran in this process.
bool configured();
// One line to print at start-up if configure() replaced OpenBLAS's fallback kernel ("" otherwise):
// "headgrad: note: OpenBLAS fell back to its Prescott kernel on this CPU; using SkylakeX instead
// (...)".
std::string startup_notice();

// The kernel a fallback core should be replaced with on this CPU ("" if none is needed).
std::string preferred_core(const std::string& active_core, const CpuFeatures& cpu);
// A wider kernel than `core` that this CPU runs ("" if none): preferred_core's answer for a
// fallback core, and SkylakeX for an AVX2 one (Haswell, Zen) on a CPU with AVX-512. `headgrad info`
// names it when the user's OPENBLAS_CORETYPE holds gemms to the narrower kernel (never changing it).
std::string wider_core(const std::string& core, const CpuFeatures& cpu);
// The kernel OpenBLAS runs (openblas_get_corename()), or the test hook's simulated fallback.
std::string active_core();
// Whether OPENBLAS_CORETYPE holds the user's own choice (set, and not the test hook's fallback).
bool user_chose_core();

// The line a program that skipped configure() gets at its first gemm, or "" when none is due:
// configure() ran, the user chose the kernel, HEADGRAD_BLAS_AUTOCORE=0, or the kernel is the
// CPU's best already. Starts with "headgrad: note: " (as every informational line does).
std::string fallback_kernel_warning();
// Prints fallback_kernel_warning() to stderr the first time it is called in the process (if it is
// not empty); every later call costs one relaxed atomic load. kernels::blas_gemm calls it.
void note_blas_kernel_once();

} // namespace headgrad::runtime
