// kernel_table.hpp - the kernels compiled once per instruction set (framework/kernels/isa/*.cpp,
// built by CMakeLists.txt with -march=x86-64-v4, -march=x86-64-v3 and the baseline flags) as one
// table of function pointers per instruction set. kernel_table() is the active one
// (runtime::active_isa()); the dispatching wrappers in framework/kernels/vector_math.hpp call
// through it. Every entry works on a contiguous range on the calling thread: the wrappers split
// the work over OpenMP threads.
#pragma once
#include <cstdint>

#include "framework/runtime/cpu_isa.hpp"

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

struct KernelTable {
  runtime::Isa isa;
  MathKernels<float> f32;
  MathKernels<double> f64;
  template <typename T> const MathKernels<T>& math() const {
    if constexpr (sizeof(T) == 4) return f32;
    else return f64;
  }
};

// One per instruction set built into this binary (each defined by its copy of the isa/ sources).
namespace isa_baseline { const KernelTable& kernel_table(); }
namespace isa_avx2 { const KernelTable& kernel_table(); }
namespace isa_avx512 { const KernelTable& kernel_table(); }

// The table of runtime::active_isa().
const KernelTable& kernel_table();

} // namespace headgrad::kernels
