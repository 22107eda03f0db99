// kernel_set_isa.cpp - this copy's part of the kernel table (kernel_table.hpp): every kernel of
// the seam's HEADGRAD_ISA_KERNELS list, set by name to this copy's instance - the templates of the
// kernel headers instantiated here, in this copy's namespace (isa_namespace.hpp), at its vector
// width (vec_math.hpp's kLanes: 16 floats for AVX-512) - and the engine's own entries.
#include "framework/engine/kernels/adam_update.hpp"
#include "framework/engine/kernels/attention_heads.hpp"
#include "framework/engine/kernels/attention_rows.hpp"
#include "framework/engine/kernels/cross_entropy_rows.hpp"
#include "framework/engine/kernels/kernel_table.hpp"
#include "framework/engine/kernels/layer_norm_rows.hpp"
#include "framework/engine/kernels/row_bias.hpp"
#include "framework/engine/kernels/row_softmax.hpp"
#include "framework/engine/kernels/small_gemm.hpp"
#include "framework/engine/kernels/vector_math.hpp"

#ifndef HEADGRAD_ISA_NS
#error "HEADGRAD_ISA_NS names this copy's namespace (set by CMakeLists.txt)"
#endif

namespace headgrad::engine::HEADGRAD_ISA_NS {
namespace {

#if defined(__AVX512F__)
constexpr runtime::Isa kIsa = runtime::Isa::avx512;
#elif defined(__AVX2__)
constexpr runtime::Isa kIsa = runtime::Isa::avx2;
#else
constexpr runtime::Isa kIsa = runtime::Isa::baseline;
#endif

template <typename T> void fill_entries(kernels::KernelSet<T>& set, EngineEntries<T>& own) {
#define HEADGRAD_SET_KERNEL(RET, NAME, PARAMS, ARGS) set.NAME = &NAME<T>;
  HEADGRAD_ISA_KERNELS(HEADGRAD_SET_KERNEL)
#undef HEADGRAD_SET_KERNEL
  own.attention_rows_fit = &attention_rows_fit<T>;
  own.small_gemm = &small_gemm;
}

} // namespace

IsaTable isa_table() {
  IsaTable t;
  t.isa = kIsa;
  fill_entries(t.kernels.f32, t.f32);
  fill_entries(t.kernels.f64, t.f64);
  return t;
}

} // namespace headgrad::engine::HEADGRAD_ISA_NS
