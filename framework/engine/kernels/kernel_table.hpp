// kernel_table.hpp - the engine's side of the seam's kernel table (framework/engine/kernels.hpp).
//
// The kernels of HEADGRAD_ISA_KERNELS are compiled once per instruction set
// (framework/engine/kernels/isa/, built by CMakeLists.txt with -march=x86-64-v4, -march=x86-64-v3
// and the baseline flags); each copy fills its part of an IsaTable by name from the list
// (isa/kernel_set_isa.cpp), and kernel_table.cpp adds the kernels compiled once
// (HEADGRAD_ONCE_KERNELS). kernels::kernel_table() hands the ops the table of runtime::active_isa(),
// or in reference mode the book's loops (kernels::book_table()).
#pragma once
#include <cstdint>

#include "framework/engine/kernels.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"

namespace headgrad::engine {

// The engine's own entries of one copy, which no book file calls.
template <typename T> struct EngineEntries {
  // Whether this copy's attention row kernels take a pair with Tk keys of head size dh
  // (attention_rows.hpp).
  bool (*attention_rows_fit)(std::int64_t Tk, std::int64_t dh) = nullptr;
  // The loop gemm for tiny matrices (small_gemm.hpp), at this copy's vector width.
  kernels::gemm_fn<T>* small_gemm = nullptr;
};

struct IsaTable {
  runtime::Isa isa = runtime::Isa::baseline;
  kernels::KernelTable kernels; // the list's kernels
  EngineEntries<float> f32;
  EngineEntries<double> f64;
  template <typename T> const EngineEntries<T>& engine() const {
    if constexpr (sizeof(T) == 4) return f32;
    else return f64;
  }
};

// One per instruction set built into this binary, each with the list's kernels of its copy (the
// ones compiled once are not set there).
namespace isa_baseline { IsaTable isa_table(); }
namespace isa_avx2 { IsaTable isa_table(); }
namespace isa_avx512 { IsaTable isa_table(); }

// The whole table of one instruction set this binary holds (std::invalid_argument when the CPU
// does not run it), and of runtime::active_isa().
const IsaTable& isa_table(runtime::Isa isa);
const IsaTable& active_isa_table();

} // namespace headgrad::engine
