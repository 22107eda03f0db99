// kernel_table.cpp - which copy of the per-instruction-set kernels runs (isa/kernel_table.hpp).
#include "framework/engine/kernels/kernel_table.hpp"

#include <cstdio>
#include <string>

namespace headgrad::kernels {

const KernelTable& kernel_table() {
  // A HEADGRAD_ISA the kernels cannot obey is said once, on the first kernel call.
  static const bool told = [] {
    const std::string notice = runtime::isa_notice();
    if (!notice.empty()) std::fprintf(stderr, "headgrad: note: %s\n", notice.c_str()); // informational, as startup.hpp's notes
    return true;
  }();
  (void)told;
#if HEADGRAD_MULTI_ISA
  switch (runtime::active_isa()) {
  case runtime::Isa::avx512: return isa_avx512::kernel_table();
  case runtime::Isa::avx2: return isa_avx2::kernel_table();
  case runtime::Isa::baseline: break;
  }
#endif
  return isa_baseline::kernel_table();
}

} // namespace headgrad::kernels
