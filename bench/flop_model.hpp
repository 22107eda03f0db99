// flop_model.hpp - the FLOPs of one training step of the reference model, and the list of the
// gemms that step runs (the shapes the sgemm limit is measured on).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/run/run_config.hpp"

namespace headgrad::bench {

// Only matmul/linear FLOPs count (2 M N K per gemm), elementwise work is ignored. With M = B T
// rows, dh = d / heads, L layers, per layer: W_q W_k W_v W_o (4 gemms of M x d x d), scores
// Q K^T and weights V (2 batched gemms of B heads x T x T x dh = B T^2 d each), FFN (M x d x ffn
// twice); then the output layer (M x d x V):
//   forward  = L (8 M d^2 + 4 B T^2 d + 4 M d ffn) + 2 M d V
//   backward = 2 x forward (each gemm has two gradient gemms of the same size)
//   step     = 3 x forward
// T is the padded length: every position is computed, as in both frameworks. The language model
// of the text task (models/gpt.hpp: q, k, v as one c_attn gemm, a causal attention that both
// frameworks compute in full, V the tokenizer's vocabulary, T the context) has the same FLOPs.
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
  // Which size counts the batch's rows (B T positions, or B sequences for attention's per-head
  // gemms): 'm', 'k' (a weight gradient sums over them) or 'b' (batch). A thread that trains on
  // its share of the batch (train/parallel/thread_replicas.hpp) runs the gemm with that size divided.
  char rows_in = 'm';
  double flops() const { return 2.0 * static_cast<double>(m * n * k * batch); }
  std::string str() const; // "NT 1024x64x64" or "NN 16x16x16 x256"
};
// Every gemm of one training step (forward and backward), identical shapes merged: the
// reference model's (models/transformer.hpp), or with the text task the language model's
// (models/gpt.hpp). The sum of count * flops() equals step_flops(c): the benchmark checks this
// (check_flop_model), so the formula above and the list can't drift apart.
std::vector<GemmShape> model_gemm_shapes(const train::RunConfig& c);
// Throws std::logic_error naming `what` when the gemm list and the formula disagree.
void check_flop_model(const train::RunConfig& c, const std::string& what);

} // namespace headgrad::bench
