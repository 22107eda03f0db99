// bench_common.hpp - what the benchmark's parent and child processes share: the two model
// configurations with the training settings, the FLOP model, the model's own gemm shapes and
// the cblas_sgemm limit measured on them, /proc readers and a process launcher.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/run_config.hpp"

namespace headgrad::bench {

// One benchmark configuration: the reference model (models::SequenceModel) on the sort task, with
// a name. `run` holds its shape (Role::shape fields) and the training settings of the bench run.
struct BenchConfig {
  std::string name;
  train::RunConfig run;
  std::string str() const; // "B64 T16 (4-16) d64 h4 L2 ffn128 V16"
};
// The configurations over `settings`, a RunConfig whose training settings (every field that is
// not Role::shape) they take. small has RunConfig{}'s shape: the default `headgrad train` run.
BenchConfig small_config(const train::RunConfig& settings);
BenchConfig large_config(const train::RunConfig& settings);
BenchConfig config_by_name(const std::string& name, const train::RunConfig& settings); // throws for others
// "adam lr 0.003, warmup 300, cosine schedule, clip 1, <= 6000 steps, seed 0"
std::string settings_summary(const train::RunConfig& c);

// ---- FLOP model ---------------------------------------------------------------------------------
// Only matmul/linear FLOPs count (2 M N K per gemm), elementwise work is ignored. With M = B T
// rows, dh = d / heads, L layers, per layer: W_q W_k W_v W_o (4 gemms of M x d x d), scores
// Q K^T and weights V (2 batched gemms of B heads x T x T x dh = B T^2 d each), FFN (M x d x ffn
// twice); then the output layer (M x d x V):
//   forward  = L (8 M d^2 + 4 B T^2 d + 4 M d ffn) + 2 M d V
//   backward = 2 x forward (each gemm has two gradient gemms of the same size)
//   step     = 3 x forward
// T is the padded length: every position is computed, as in both frameworks.
inline constexpr const char* kFlopFormula =
    "step = 3 x forward (backward = 2 x forward); forward = L (8 M d^2 + 4 B T^2 d + 4 M d ffn) + 2 M d V, "
    "M = B T; matmul FLOPs only (2 M N K per gemm), elementwise ignored";
double forward_flops(const train::RunConfig& c);
double step_flops(const train::RunConfig& c);

// A gemm the training step runs, as cblas_sgemm sees it (row-major, op(A) m x k, op(B) k x n),
// `batch` independent gemms per call (attention: B * heads), `count` calls per training step.
struct GemmShape {
  bool ta, tb;
  std::int64_t m, n, k, batch, count;
  std::string what; // "W_q fwd, ..." (merged when several uses share a shape)
  double flops() const { return 2.0 * static_cast<double>(m * n * k * batch); }
  std::string str() const; // "NT 1024x64x64" or "NN 16x16x16 x256"
};
// Every gemm of one training step (forward and backward), identical shapes merged. The sum of
// count * flops() equals step_flops(c): the benchmark checks this, so the formula above and the
// list can't drift apart.
std::vector<GemmShape> model_gemm_shapes(const train::RunConfig& c);

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
// Each shape is timed two ways with `threads` threads, and the faster counts: cblas_sgemm with
// OpenBLAS's own threads (openblas_set_num_threads(threads)), and headgrad's split of the same
// calls over OpenMP threads with single-threaded BLAS (kernels::gemm / gemm_batched). Either is
// "what sgemm can do here", so the limit is the better of the two.
SgemmLimit measure_sgemm_limit(const train::RunConfig& c, double min_seconds, int threads);

// ---- processes ----------------------------------------------------------------------------------
// Peak and current resident set of this process in KiB from /proc/self/status (VmHWM, VmRSS).
// VmHWM belongs to the address space, so it starts afresh at exec; ru_maxrss does not (Linux
// carries the pre-exec maximum over), which is why the benchmark reads VmHWM.
std::int64_t proc_status_kib(const char* key);
double now_seconds();

// Runs argv[0] (a path) with argv; `env` entries are set in the child's environment (nullopt:
// removed from it); stdout optionally goes to `stdout_path` ("" = inherited), stderr is inherited.
// Returns the exit code (128 + signal if killed, 127 if it could not start).
using EnvChanges = std::map<std::string, std::optional<std::string>>;
int run_process(const std::vector<std::string>& argv, const EnvChanges& env, const std::string& stdout_path = "");
// Runs argv and returns its stdout (exit code in *code).
std::string capture_process(const std::vector<std::string>& argv, int* code);

double median(std::vector<double> v);

} // namespace headgrad::bench
