// linear_gemm.hpp - the float32 gemm of the kernel table (kernels::gemm<float>: what linear
// layers run, forward and backward), and the one place that chooses what runs it:
//
//   matmul precision bf16 (kernels.hpp; runtime::Autocast)  ->  oneDNN, bf16 inputs, float32
//                                                               accumulation and output
//   float32, HEADGRAD_GEMM=openblas (the default)           ->  OpenBLAS's sgemm (kernels/gemm.hpp)
//   float32, HEADGRAD_GEMM=onednn                           ->  oneDNN's float32 matmul
//   float32, HEADGRAD_GEMM=auto                             ->  float32_gemm_on_onednn's rule
//
// The choice depends on the sizes and the settings only, never on a timing taken while running:
// a run's bits must not depend on how busy the machine was. torch.matmul's gemms and attention's
// (kernels/matmul.cpp, gemm_batched.hpp) always run OpenBLAS in float32; double always does.
//
// Threads. A oneDNN gemm (either precision) is cut into blocks of C by its sizes alone
// (onednn_grid_parts), each block one single-threaded oneDNN call, the blocks spread over the
// OpenMP threads when there are several and none is busy: the blocks - and so every bit of C - are
// the same at any thread count, and a training thread running its shard runs them one after the
// other. (OpenBLAS's sgemm gives a row block of C the bits of the whole, so kernels/gemm.hpp cuts
// by the thread count.)
//
// bf16 operands. An operand inside a weight that the open runtime::Autocast rounded on entry is
// read from that copy; any other is rounded here, in every call, into the calling thread's
// scratch (autocast.hpp says why activations are never looked up by address).
#pragma once
#include <cstdint>
#include <string>

#include "framework/engine/blas/bf16.hpp"

namespace headgrad::runtime {

enum class Float32Gemm { openblas, onednn, automatic };
// HEADGRAD_GEMM (openblas, onednn or auto; read at first use: another value keeps the default and
// gemm_notice() says so), unless set_float32_gemm changed it. Call it between steps.
Float32Gemm float32_gemm();
void set_float32_gemm(Float32Gemm choice);
const char* float32_gemm_name(Float32Gemm choice); // "openblas", "onednn", "auto"
std::string gemm_notice(); // "" unless HEADGRAD_GEMM held something else
// What runs float32 linear gemms under the current setting, for `headgrad info` and the benchmark.
std::string float32_gemm_summary();
// Whether a float32 linear gemm of these sizes runs on oneDNN under the current setting.
bool float32_gemm_on_onednn(std::int64_t m, std::int64_t n, std::int64_t k);

} // namespace headgrad::runtime

namespace headgrad::engine {

// kernels::gemm<float>'s entry in the engine's table: C = alpha op(A) op(B) + beta C as chosen above.
void linear_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                 std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// The bf16 path itself, whatever the precision setting (the bf16 benchmark and tests call it).
void bf16_linear_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc);
// oneDNN's float32 matmul over the same blocks.
void onednn_linear_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                        const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                        std::int64_t ldc);

// How many blocks a oneDNN gemm of C (m x n, sum over k) is cut into along its longer side: a
// power of two, from the sizes alone.
int onednn_grid_parts(std::int64_t m, std::int64_t n, std::int64_t k);

// (autocast.cpp) The bf16 copy of the `extent` floats at `data` when they lie inside a weight the
// open guard rounded, else null.
const blas::bf16* autocast_weight(const float* data, std::int64_t extent);
void count_operand_conversion(std::int64_t elements);

} // namespace headgrad::engine
