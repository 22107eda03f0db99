// onednn_matmul.hpp - C = alpha op(A) op(B) + beta C through oneDNN's matmul primitive, in float32
// and in bf16 (bf16 inputs, float32 accumulation and output).
//
// The call has cblas_sgemm's shape with CblasRowMajor: transpose flags, sizes (op(A) is m x k,
// op(B) k x n, C m x n), and leading dimensions that may exceed the width (a transposed operand
// is read through its strides, never copied). beta 0 assigns C without reading it (what C held,
// NaN included, does not matter: the first write of a gradient); beta 1 adds to it.
//
// How it maps to oneDNN (https://oneapi-src.github.io/oneDNN/v2/dev_guide_matmul.html):
// - memory descriptors with explicit strides: op(A) is {m, k} with strides {lda, 1}, or {1, lda}
//   when A is stored transposed; op(B) {k, n} likewise; C {m, n} with strides {ldc, 1};
// - alpha is an output scale and beta a sum post-op (attributes), so dst = alpha A B + beta dst;
// - the scratchpad is ours (scratchpad mode "user"): one growing buffer per thread, not a
//   malloc inside every call.
// Creating a primitive compiles its kernel, which costs more than most of the training steps'
// gemms take (headgrad_gemm_bench measures both), so primitives are cached per (sizes, leading dimensions, transposes, input type,
// alpha, beta): the first call of a shape creates one, every later call reuses it. The cache
// holds at most kOnednnCacheCapacity primitives (least recently used dropped first).
//
// Threads. Debian's oneDNN 2.6 threads with OpenMP (libgomp, the same runtime as headgrad's) and
// would open a region of omp_get_max_threads() threads of its own inside each call. These calls
// instead always run on the calling thread with one oneDNN thread, created and executed that
// way, as kernels::blas_gemm runs BLAS: a caller that wants threads splits C into blocks, one
// call each (kernels/gemm.hpp), and a training thread running its shard keeps to itself. Row
// blocks give the same bits as the whole product where both run the same oneDNN kernel
// (tests/test_onednn_matmul.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "framework/engine/blas/bf16.hpp"

namespace headgrad::blas {

// float32 inputs (oneDNN f32 matmul).
void onednn_sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                  std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// bf16 inputs, float32 accumulation and output. Throws std::runtime_error with bf16_missing()'s
// line (bf16_cpu.hpp) on a CPU without a bf16 matmul.
void onednn_bf16_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const bf16* a, std::int64_t lda, const bf16* b, std::int64_t ldb, float beta, float* c,
                      std::int64_t ldc);
// The same with float32 inputs, each rounded to bf16 (to_bf16) into a buffer of the calling
// thread first: what a caller without bf16 copies of its operands runs.
void onednn_bf16_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

enum class GemmInputs { f32, bf16 };
const char* gemm_inputs_name(GemmInputs inputs); // "f32", "bf16"

// The oneDNN implementation such a gemm runs (alpha 1, beta 0), e.g. "brg:avx512_core_bf16" (a
// batch-reduce gemm JIT-compiled for AVX-512 BF16) or "gemm:jit": for the benchmark and
// `headgrad info`. Creates (and caches) the primitive if it does not exist yet.
std::string onednn_implementation(GemmInputs inputs, bool ta, bool tb, std::int64_t m, std::int64_t n,
                                  std::int64_t k, std::int64_t lda, std::int64_t ldb, std::int64_t ldc);

inline constexpr std::int64_t kOnednnCacheCapacity = 256;
struct OnednnCacheStats {
  std::int64_t created = 0; // primitives created since the process started
  std::int64_t reused = 0;  // calls that found theirs in the cache
  std::int64_t size = 0;    // primitives held now
};
OnednnCacheStats onednn_cache_stats();
// Drops every cached primitive (each thread's references too, at its next call); with
// `library_cache_too`, oneDNN's own primitive cache as well, so that the next creation compiles
// its kernel again (the benchmark measures that cost).
void onednn_clear_cache(bool library_cache_too = false);

} // namespace headgrad::blas
