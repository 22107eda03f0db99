// kernel_table.hpp - the kernels compiled once per instruction set (framework/engine/kernels/isa/*.cpp,
// built by CMakeLists.txt with -march=x86-64-v4, -march=x86-64-v3 and the baseline flags) as one
// table of function pointers per instruction set. kernel_table() is the active one
// (runtime::active_isa()); the dispatching wrappers in framework/engine/kernels/vector_math.hpp call
// through it. Every entry works on a contiguous range on the calling thread: the wrappers split
// the work over OpenMP threads.
#pragma once
#include <cstdint>

#include "framework/engine/kernels/adam_update.hpp"
#include "framework/engine/kernels/attention_heads.hpp"
#include "framework/engine/kernels/attention_rows.hpp"
#include "framework/engine/kernels/cross_entropy_rows.hpp"
#include "framework/engine/kernels/layer_norm_rows.hpp"
#include "framework/engine/kernels/row_bias.hpp"
#include "framework/engine/kernels/row_softmax.hpp"
#include "framework/engine/kernels/small_gemm.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"

namespace headgrad::kernels {

// The two forms of GELU (torch.nn.functional.gelu's approximate = 'none' | 'tanh').
enum class GeluForm { erf, tanh };

template <typename T> struct MathKernels {
  // y[i] = f(x[i]), i < n: SLEEF's 1-ulp functions (Sleef_*_u10) at the table's vector width.
  void (*exp)(T* y, const T* x, std::int64_t n);
  void (*log)(T* y, const T* x, std::int64_t n);
  void (*tanh)(T* y, const T* x, std::int64_t n);
  // For each of `rows` rows of `cols`: u = z[r, c] + bias[c] (bias may be null: u = z),
  // y = gelu(u) and, when dydu is not null, dydu = gelu'(u). y may be z itself (in place).
  void (*gelu[2])(T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols); // [GeluForm]
};

// The row kernels of the headers above (softmax rows, layer norm, cross-entropy, bias and column
// sums), attention's per-head work, the tiny gemms and the Adam update, each the instance that copy
// compiled.
template <typename T> struct RowKernels {
  decltype(&kernels::softmax_forward<T>) softmax_forward;
  decltype(&kernels::softmax_backward<T>) softmax_backward;
  decltype(&kernels::log_softmax_forward<T>) log_softmax_forward;
  decltype(&kernels::log_softmax_backward<T>) log_softmax_backward;
  decltype(&kernels::layer_norm_forward<T>) layer_norm_forward;
  decltype(&kernels::add_layer_norm_forward<T>) add_layer_norm_forward;
  decltype(&kernels::layer_norm_backward<T>) layer_norm_backward;
  decltype(&kernels::cross_entropy_forward<T>) cross_entropy_forward;
  decltype(&kernels::cross_entropy_backward<T>) cross_entropy_backward;
  decltype(&kernels::fill_rows<T>) fill_rows;
  decltype(&kernels::add_rows<T>) add_rows;
  decltype(&kernels::column_sums<T>) column_sums;
  decltype(&kernels::attention_forward<T>) attention_forward;
  decltype(&kernels::attention_backward<T>) attention_backward;
  decltype(&kernels::flash_attention_forward<T>) flash_attention_forward;
  decltype(&kernels::flash_attention_backward<T>) flash_attention_backward;
  decltype(&kernels::attention_rows_fit<T>) attention_rows_fit;
  decltype(&kernels::adam_update<T>) adam_update;
  void (*small_gemm)(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                     std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);
};

struct KernelTable {
  runtime::Isa isa;
  MathKernels<float> f32;
  MathKernels<double> f64;
  RowKernels<float> rows_f32;
  RowKernels<double> rows_f64;
  template <typename T> const MathKernels<T>& math() const {
    if constexpr (sizeof(T) == 4) return f32;
    else return f64;
  }
  template <typename T> const RowKernels<T>& rows() const {
    if constexpr (sizeof(T) == 4) return rows_f32;
    else return rows_f64;
  }
};

// One per instruction set built into this binary (each defined by its copy of the isa/ sources).
namespace isa_baseline { const KernelTable& kernel_table(); }
namespace isa_avx2 { const KernelTable& kernel_table(); }
namespace isa_avx512 { const KernelTable& kernel_table(); }
#ifdef HEADGRAD_ISA_NS
// Inside a copy: its row kernels' part of the table (row_kernels_isa.cpp; vector_math_isa.cpp
// assembles the whole).
namespace HEADGRAD_ISA_NS {
RowKernels<float> row_kernels_f32();
RowKernels<double> row_kernels_f64();
} // namespace HEADGRAD_ISA_NS
#endif

// The table of runtime::active_isa().
const KernelTable& kernel_table();

} // namespace headgrad::kernels
