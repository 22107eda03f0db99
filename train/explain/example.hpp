// example.hpp - the tiny multi-head attention example `headgrad explain` walks through: the sizes,
// d2l's MultiHeadAttention (float64), its inputs (three, or one X for self-attention), the keys
// each query keeps (valid_lens, causal), the fixed dropout mask on the weights, and the loss: L =
// sum(Y ⊙ R) for a fixed random R, or the masked cross-entropy of Y against random targets.
// Random from a seed, or read from a PyTorch fixture.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "models/attention.hpp"
#include "train/explain/explain.hpp"

namespace headgrad::cli::explain {

struct Example {
  std::int64_t B = 0, Tq = 0, Tk = 0;              // batch, queries, keys (= values)
  std::int64_t q_size = 0, k_size = 0, v_size = 0; // feature sizes of queries, keys, values
  std::int64_t h = 0, H = 0, d = 0;                // num_hiddens, heads, d = h / H per head
  std::unique_ptr<models::MultiHeadAttention> mha;
  // Leaves that need grad: (B, Tq, q_size), (B, Tk, k_size), (B, Tk, v_size). With self-attention
  // all three are the one input X (B, T, h), T = Tq = Tk.
  Tensor queries, keys, values;
  bool self_attention = false;
  bool causal = false;
  Tensor valid_lens; // (B), or (B, Tq): per query, and with causal min(i + 1, valid_len)
  Tensor keep;       // bool (B, Tq, Tk): key j kept for query i (from valid_lens)
  double p = 0;      // dropout on the weights, with the fixed mask below
  Tensor drop_mask;  // (B*H, Tq, Tk) of 0 and 1 when p > 0
  bool cross_entropy = false; // the loss: false, L = sum(Y ⊙ R); true, cross_entropy(Y, targets, loss_mask)
  Tensor R;                   // (B, Tq, h) the fixed upstream gradient of the R loss
  Tensor targets;             // (B, Tq) int64 classes in [0, h), with cross-entropy
  Tensor loss_mask;           // (B, Tq) bool: position t counts when t < valid_len
  std::string source;         // "random values, seed 0" or "values from FILE"
  // PyTorch's gradients by fixture name (grad_output, grad.scores, grad.W_q.weight, ...), float64;
  // empty for random values. A fixture older than the stage gradients has only the leaves'.
  std::map<std::string, Tensor> pytorch;

  // PyTorch's value of the gradient `name`, or an undefined tensor if the example has none.
  Tensor pytorch_grad(const std::string& name) const;
  // The example's loss of an output Y (B, Tq, h).
  Tensor loss(const Tensor& Y) const;
  // The named inputs: queries, keys, values, or X alone with self-attention.
  NamedTensors inputs() const;
};

// Throws std::invalid_argument for impossible options (hidden % heads, valid_len > keys, ...).
Example make_example(const ExplainOptions& o);

} // namespace headgrad::cli::explain
