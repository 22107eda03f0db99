// named_forward.hpp - the example's forward as one graph, op for op what models::MultiHeadAttention
// runs on its composed path (d2l's code: the projections, transpose_qkv's reshape, permute and
// reshape, the scaled scores, the masked softmax, the weighted sum, transpose_output, W_o), with
// every op output named by what it holds, the example's fixed dropout mask on the weights, and
// the example's loss. `headgrad explain --graph` draws it; with dropout it is also the one-graph
// reference the stages are checked against (the module would draw a mask of its own).
#pragma once
#include "train/explain/example.hpp"

namespace headgrad::cli::explain {

struct NamedForward {
  Tensor output;        // Y (B, Tq, num_hiddens), the module's output
  Tensor loss;          // L = example.loss(Y)
  NamedTensors results; // every op output by what it holds ("Q = W_q(queries)", "scores S ..."), in order
};

NamedForward named_forward(const Example& e);

} // namespace headgrad::cli::explain
