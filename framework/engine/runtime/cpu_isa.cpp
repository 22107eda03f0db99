#include "framework/engine/runtime/cpu_isa.hpp"

#include <atomic>
#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::runtime {
namespace {

// What HEADGRAD_ISA asked for and what came of it, read once.
struct Choice {
  Isa isa;
  std::string notice;
};

Choice initial_choice() {
  const Isa best = cpu_isa();
  const char* env = std::getenv("HEADGRAD_ISA");
  if (!env || !*env) return {best, ""};
  try {
    const Isa want = parse_isa(env);
    if (static_cast<int>(want) <= static_cast<int>(best)) return {want, ""};
    return {best, fmt::format("HEADGRAD_ISA={}: this CPU does not run {}; the kernels use {}", env, env,
                              isa_name(best))};
  } catch (const std::invalid_argument& e) {
    return {best, fmt::format("HEADGRAD_ISA: {}; the kernels use {}", e.what(), isa_name(best))};
  }
}

const Choice& choice() {
  static const Choice c = initial_choice();
  return c;
}

constexpr int kUnset = -1;
std::atomic<int> g_override{kUnset}; // set_isa's choice, once made

} // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
  case Isa::baseline: return "baseline";
  case Isa::avx2: return "avx2";
  case Isa::avx512: return "avx512";
  }
  return "?";
}

Isa parse_isa(const std::string& name) {
  for (Isa isa : {Isa::baseline, Isa::avx2, Isa::avx512})
    if (name == isa_name(isa)) return isa;
  throw std::invalid_argument(fmt::format("unknown instruction set '{}' (choose baseline, avx2 or avx512)", name));
}

Isa cpu_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  // libgcc's CPU model: cpuid, and xgetbv for whether the OS saves the AVX / AVX-512 registers.
  // The levels are the x86-64 psABI's (https://gitlab.com/x86-psABIs/x86-64-ABI), which GCC's
  // -march=x86-64-v3 / -v4 compile the per-ISA kernels for.
  __builtin_cpu_init();
#if defined(__clang__) // clang 14 knows the features but not the levels' names: the levels' AVX parts
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                  __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
#else
  const bool v3 = __builtin_cpu_supports("x86-64-v3"), v4 = __builtin_cpu_supports("x86-64-v4");
#endif
  if (v4) return Isa::avx512;
  if (v3) return Isa::avx2;
#endif
  return Isa::baseline;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::baseline, Isa::avx2, Isa::avx512})
    if (static_cast<int>(isa) <= static_cast<int>(cpu_isa())) out.push_back(isa);
  return out;
}

Isa active_isa() {
  const int o = g_override.load(std::memory_order_relaxed);
  return o == kUnset ? choice().isa : static_cast<Isa>(o);
}

void set_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(cpu_isa()))
    throw std::invalid_argument(
        fmt::format("set_isa: this CPU does not run {} (it runs up to {})", isa_name(isa), isa_name(cpu_isa())));
  g_override.store(static_cast<int>(isa), std::memory_order_relaxed);
}

std::string isa_notice() { return choice().notice; }

} // namespace headgrad::runtime
