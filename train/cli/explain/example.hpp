// example.hpp - the tiny multi-head attention example `headgrad explain` walks through: the sizes,
// d2l's MultiHeadAttention (no bias, no dropout, float64), its inputs and the upstream gradient R,
// random from a seed or read from a PyTorch fixture.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "models/attention.hpp"
#include "train/cli/explain/explain.hpp"

namespace headgrad::cli::explain {

struct Example {
  std::int64_t B = 0, Tq = 0, Tk = 0;              // batch, queries, keys (= values)
  std::int64_t q_size = 0, k_size = 0, v_size = 0; // feature sizes of queries, keys, values
  std::int64_t h = 0, H = 0, d = 0;                // num_hiddens, heads, d = h / H per head
  std::unique_ptr<models::MultiHeadAttention> mha;
  Tensor queries, keys, values; // leaves that need grad: (B, Tq, q_size), (B, Tk, k_size), (B, Tk, v_size)
  Tensor valid_lens;            // (B) or (B, Tq)
  Tensor R;                     // dL/d(output), (B, Tq, h)
  std::string source;           // "random values, seed 0" or "values from FILE"
  // PyTorch's gradients by fixture name (grad_output, grad.scores, grad.W_q.weight, ...), float64;
  // empty for random values. A fixture older than the stage gradients has only the leaves'.
  std::map<std::string, Tensor> pytorch;

  // PyTorch's value of the gradient `name`, or an undefined tensor if the example has none.
  Tensor pytorch_grad(const std::string& name) const;
};

// Throws std::invalid_argument for impossible options (hidden % heads, valid_len > keys, ...).
Example make_example(const ExplainOptions& o);

} // namespace headgrad::cli::explain
