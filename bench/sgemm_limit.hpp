// sgemm_limit.hpp - the practical ceiling of the step's gemms: cblas_sgemm timed on the model's
// own gemm shapes (flop_model.hpp), in this process.
#pragma once
#include <string>
#include <vector>

#include "bench/flop_model.hpp"

namespace headgrad::bench {

struct SgemmShapeResult {
  GemmShape shape;
  double seconds; // best time of one call (all `batch` gemms)
  double gflops;
};
struct SgemmLimit {
  double best_gflops = 0;        // the fastest shape: the practical ceiling quoted in the targets
  std::string best_shape;
  double mix_gflops = 0;         // step FLOPs / time of one step's gemms at their measured speeds
  double matmul_ms_per_step = 0; // that time, in ms: what the step would cost if it were only gemms
  std::vector<SgemmShapeResult> shapes;
};
// Times cblas_sgemm on every shape (best of repeated calls, at least `min_seconds` per shape), in
// this process with the current BLAS thread setting.
// Each shape is timed three ways with `threads` threads, and the fastest counts: cblas_sgemm with
// OpenBLAS's own threads (openblas_set_num_threads(threads)), headgrad's split of the same calls
// over OpenMP threads with single-threaded BLAS (engine::gemm / gemm_batched), and each thread
// running its share of the batch's rows at the same time (data parallelism over threads, as
// train/parallel/thread_replicas.hpp trains; a weight gradient is then a partial sum per thread, whose
// addition is not counted). Each is "what sgemm can do here", so the limit is the best of them.
// With `bf16`, the linear layers' gemms (the shapes of batch 1) are timed as --precision bf16 runs
// them instead (engine::bf16_linear_gemm: oneDNN, bf16 inputs, float32 sums; the operands rounded
// beforehand, as the guard rounds the weights once per step - the rounding of activations in each
// call is not counted) and attention's per-head gemms, which stay float32, as above: the bf16
// step's gemm limit.
SgemmLimit measure_sgemm_limit(const train::RunConfig& c, double min_seconds, int threads, bool bf16 = false);

} // namespace headgrad::bench
