// kernel_table.cpp - which copy of the per-instruction-set kernels runs (isa/kernel_table.hpp).
#include "framework/kernels/isa/kernel_table.hpp"

namespace headgrad::kernels {

const KernelTable& kernel_table() {
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
