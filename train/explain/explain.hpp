// explain.hpp - `headgrad explain`: runs multi-head attention on a tiny example and prints every
// named tensor of the forward and, in reverse, every gradient of the backward, then the gradient
// check verdict for the example. Built stage by stage: each stage's input is a fresh leaf, so the
// printed gradient of one stage is exactly the upstream gradient the previous stage receives.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad::cli::explain {

// Every member has an initialiser (the strings' {} too), so that designated initialisers may
// name only the options they set, {.layer_norm = true}, with -Wmissing-field-initializers on.
struct ExplainOptions {
  std::int64_t batch = 1, queries = 3, keys = 4, hidden = 4, heads = 2, valid_len = 3;
  std::uint64_t seed = 0;
  int precision = 4;
  bool bias = false;  // W_q, W_k, W_v, W_o with biases (d2l's bias=True)
  bool self_attention = false; // one X (batch, keys, hidden) for queries, keys and values
  bool causal = false;         // query i keeps keys j <= i too (valid_lens per query, min(i + 1, valid_len))
  std::string loss = "r";      // "r": L = sum(Y * R); "cross-entropy": Y are logits, random targets
  double dropout = 0;          // p of a fixed dropout mask on the attention weights
  bool fused = false;          // also the fused kernel's backward per head: dP, D, dS, and ops::attention
  std::string svg{};  // write the head split, per-head weights and gradients here when not empty
  bool shared_scale = false;   // --svg: one colour scale for every signed panel (else each its own)
  std::string graph{}; // write the autograd graph here (DOT, and SVG when Graphviz is installed)
  // Take inputs, weights, valid_lens and the upstream gradient from a safetensors file laid out
  // like tests/reference/fixtures/mha_d2l.safetensors (PyTorch's numbers) instead of random ones;
  // sizes come from the tensors, num_heads from its metadata.
  std::string fixture{};
  // Take queries, keys, values, valid_lens, num_heads (and any weights and upstream gradient it
  // gives) from a small text file of your own (train/explain/input_file.hpp); the rest is random
  // from --seed.
  std::string input{};
  // Instead of attention: layer norm of one row, derived step by step (train/explain/layer_norm.hpp).
  bool layer_norm = false;
  // One line per tensor (its shape, and whether it is all 0 or its largest |entry|) instead of its values.
  bool summary = false;
};

struct ExplainResult {
  std::string text;      // everything `headgrad explain` prints
  bool gradcheck_ok = false;
  bool stages_match_full_graph = false; // staged gradients == one-graph gradients
  bool fused_match = false;             // --fused: D, dS and ops::attention's gradients equal the stages'

  // The main results by fixture name: output, attention_weights (B, H, Tq, Tk), grad.queries,
  // grad.keys, grad.values, then grad.<name> of every parameter (grad.W_q.weight ...).
  std::vector<std::pair<std::string, Tensor>> tensors;
};

// Throws std::invalid_argument for impossible options (hidden % heads, valid_len > keys, ...).
ExplainResult run(const ExplainOptions& options);

} // namespace headgrad::cli::explain
