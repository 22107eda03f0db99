// stages.hpp - multi-head attention run stage by stage, as `headgrad explain` prints it. Each
// stage's input is a fresh leaf holding the previous stage's output, so the gradient printed for
// a stage's input is exactly the upstream gradient the previous stage receives.
#pragma once
#include "train/cli/explain/example.hpp"
#include "train/cli/explain/tensor_printer.hpp"

namespace headgrad::cli::explain {

// Each stage's output (X) and, where a stage starts, its input leaf (X_in).
struct Stages {
  Tensor Q, K, V;                // 1. projections, (B, T, num_hiddens)
  Tensor Q_in, K_in, V_in;
  Tensor Qh, Kh, Vh;             // 2. transpose_qkv, (B*H, T, d)
  Tensor Qh_in, Kh_in, Vh_in;
  Tensor scores, scores_in;      // 3. Q K^T / sqrt(d), (B*H, Tq, Tk)
  Tensor lens;                   // valid_lens repeated per head
  Tensor weights, weights_in;    // 4. masked softmax
  Tensor heads_out, heads_in;    // 5. weights V per head, (B*H, Tq, d)
  Tensor concat, concat_in;      // 6. transpose_output, (B, Tq, num_hiddens)
  Tensor output;                 // 7. W_o(concat)
};

// The forward pass, printing every input, weight and stage output.
Stages forward_stages(const Example& e, TensorPrinter& p);
// The backward pass in reverse, from R, each stage's backward fed the gradient printed before
// it; leaves the gradients in the stage inputs, the weights and the example's inputs.
void backward_stages(const Example& e, Stages& s, TensorPrinter& p);

} // namespace headgrad::cli::explain
