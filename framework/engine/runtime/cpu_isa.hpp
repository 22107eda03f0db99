// cpu_isa.hpp - the instruction set headgrad's own vector kernels run with. The kernels that
// gain from vector width (GELU, the transcendental math, the row kernels) are compiled once per
// instruction set inside one binary (framework/engine/kernels/isa/), and one of those copies is chosen
// when a kernel first runs: the widest the CPU and the OS support, unless HEADGRAD_ISA names
// another one (PyTorch's ATEN_CPU_CAPABILITY plays this part there; torch.backends.cpu.
// get_cpu_capability(), https://pytorch.org/docs/stable/backends.html, reports its choice).
// Everything else is built for baseline x86-64.
#pragma once
#include <string>
#include <vector>

namespace headgrad::runtime {

enum class Isa {
  baseline, // x86-64 (SSE2), or plain C++ on other processors
  avx2,     // x86-64-v3: AVX2, FMA, BMI2 (Intel Haswell, AMD Zen and later)
  avx512,   // x86-64-v4: AVX-512 F, BW, CD, DQ, VL (Intel Skylake-SP, AMD Zen 4 and later)
};

const char* isa_name(Isa isa); // "baseline", "avx2", "avx512"
// The widest instruction set this CPU and OS run (the OS must save the wider registers).
Isa cpu_isa();
// Every instruction set this CPU runs, baseline first.
std::vector<Isa> supported_isas();

// The instruction set the kernels use now. On first use: HEADGRAD_ISA (baseline, avx2 or avx512)
// if set, else cpu_isa(). A value this CPU cannot run, or that names no instruction set, is not
// obeyed: the kernels use cpu_isa(), and isa_notice() says why.
Isa active_isa();
// Makes `isa` the active one (tests run each path this way). Throws std::invalid_argument when
// the CPU cannot run it.
void set_isa(Isa isa);
// Parses "baseline", "avx2" or "avx512"; throws std::invalid_argument naming the choices.
Isa parse_isa(const std::string& name);

// "" normally; one line when HEADGRAD_ISA was set to a value not obeyed.
std::string isa_notice();

} // namespace headgrad::runtime
