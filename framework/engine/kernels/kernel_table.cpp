// kernel_table.cpp - which table the seam's entry points go through: the copy of the kernels built
// for runtime::active_isa(), completed with the kernels compiled once, or in reference mode the
// book's loops.
#include "framework/engine/kernels/kernel_table.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "framework/engine/blas/linear_gemm.hpp"
#include "framework/engine/kernels/gemm_batched.hpp"
#include "framework/engine/kernels/matmul.hpp"
#include "framework/engine/kernels/small_gemm.hpp"
#include "framework/engine/kernels/vec_math.hpp"

namespace headgrad::engine {
namespace {

// The kernels of HEADGRAD_ONCE_KERNELS, the same in every table.
template <typename T> void add_once_kernels(kernels::KernelSet<T>& set) {
#define HEADGRAD_SET_KERNEL(RET, NAME, PARAMS, ARGS) set.NAME = &NAME<T>;
  HEADGRAD_ONCE_KERNELS(HEADGRAD_SET_KERNEL)
#undef HEADGRAD_SET_KERNEL
}

IsaTable complete(IsaTable t) {
  add_once_kernels(t.kernels.f32);
  add_once_kernels(t.kernels.f64);
  // float32's gemm, what linear layers run: OpenBLAS, oneDNN, or bf16 (blas/linear_gemm.hpp)
  t.kernels.f32.gemm = &linear_gemm;
  return t;
}

// Every copy this binary holds, built on first use.
struct Copies {
  IsaTable baseline = complete(isa_baseline::isa_table());
#if HEADGRAD_MULTI_ISA
  IsaTable avx2 = complete(isa_avx2::isa_table());
  IsaTable avx512 = complete(isa_avx512::isa_table());
#endif
};
const Copies& copies() {
  static const Copies c;
  return c;
}

const IsaTable& table_of(runtime::Isa isa) {
#if HEADGRAD_MULTI_ISA
  switch (isa) {
  case runtime::Isa::avx512: return copies().avx512;
  case runtime::Isa::avx2: return copies().avx2;
  case runtime::Isa::baseline: break;
  }
#else
  (void)isa;
#endif
  return copies().baseline;
}

} // namespace

const IsaTable& isa_table(runtime::Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(runtime::cpu_isa()))
    throw std::invalid_argument(std::string("isa_table: this CPU does not run ") + runtime::isa_name(isa));
  return table_of(isa);
}

const IsaTable& active_isa_table() {
  // A HEADGRAD_ISA the kernels cannot obey is said once, on the first kernel call.
  static const bool told = [] {
    const std::string notice = runtime::isa_notice();
    if (!notice.empty()) std::fprintf(stderr, "headgrad: note: %s\n", notice.c_str()); // informational, as startup.hpp's notes
    return true;
  }();
  (void)told;
  return table_of(runtime::active_isa());
}


// Outside the copies, the loop gemm of the active one (gemm_batched.hpp's tiny products).
void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  active_isa_table().f32.small_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  active_isa_table().f64.small_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

} // namespace headgrad::engine

namespace headgrad::kernels {

const KernelTable& engine_table() { return engine::active_isa_table().kernels; }

} // namespace headgrad::kernels
