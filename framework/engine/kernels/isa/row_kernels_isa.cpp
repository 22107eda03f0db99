// row_kernels_isa.cpp - the row kernels (softmax rows, layer norm, cross-entropy, bias and column
// sums), attention's per-head work, the Adam update and the tiny gemms (small_gemm.hpp), compiled
// once per instruction set: the templates of their headers instantiated here, in this copy's
// namespace (isa_namespace.hpp), at its vector width (vec_math.hpp's kLanes: 16 floats for
// AVX-512). kernels/kernel_dispatch.cpp sends the ops' calls to the active copy.
#include "framework/engine/kernels/kernel_table.hpp"

#ifndef HEADGRAD_ISA_NS
#error "HEADGRAD_ISA_NS names this copy's namespace (set by CMakeLists.txt)"
#endif

namespace headgrad::kernels::HEADGRAD_ISA_NS {
namespace {

template <typename T> RowKernels<T> row_kernels() {
  return {softmax_forward<T>,
          softmax_backward<T>,
          log_softmax_forward<T>,
          log_softmax_backward<T>,
          layer_norm_forward<T>,
          add_layer_norm_forward<T>,
          layer_norm_backward<T>,
          cross_entropy_forward<T>,
          cross_entropy_backward<T>,
          fill_rows<T>,
          add_rows<T>,
          column_sums<T>,
          attention_forward<T>,
          attention_backward<T>,
          flash_attention_forward<T>,
          flash_attention_backward<T>,
          attention_rows_fit<T>,
          adam_update<T>,
          small_gemm};
}

} // namespace

RowKernels<float> row_kernels_f32() { return row_kernels<float>(); }
RowKernels<double> row_kernels_f64() { return row_kernels<double>(); }

} // namespace headgrad::kernels::HEADGRAD_ISA_NS
