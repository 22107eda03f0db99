// stages.hpp - multi-head attention run stage by stage, as `headgrad explain` prints it. Each
// stage's input is a fresh leaf holding the previous stage's output, so the gradient printed for
// a stage's input is exactly the upstream gradient the previous stage receives. The names are the
// walkthrough's notation (docs/backprop-through-attention.md): Q, K, V, Qh, Kh, Vh, S, P, A, O, C, Y.
#pragma once
#include "train/explain/example.hpp"
#include "train/explain/tensor_printer.hpp"

namespace headgrad::cli::explain {

// Each stage's output (X) and, where a stage starts, its input leaf (X_in).
struct Stages {
  Tensor Q, K, V;                // 1. projections, (B, T, num_hiddens)
  Tensor Q_in, K_in, V_in;
  Tensor Qh, Kh, Vh;             // 2. transpose_qkv, (B*H, T, d)
  Tensor Qh_in, Kh_in, Vh_in;
  Tensor scores, scores_in;      // 3. S = s Qh Kh^T, (B*H, Tq, Tk)
  Tensor lens;                   // valid_lens repeated per head
  Tensor weights, weights_in;    // 4. P = masked_softmax(S)
  Tensor dropped, dropped_in;    // 4b. A = dropout(P) with the example's fixed mask (only when p > 0)
  Tensor heads_out, heads_in;    // 5. O = P Vh (A Vh) per head, (B*H, Tq, d)
  Tensor concat, concat_in;      // 6. C = transpose_output(O), (B, Tq, num_hiddens)
  Tensor output, output_in;      // 7. Y = W_o(C)
  Tensor loss;                   // 8. L = the example's loss of Y
};

// The forward pass, printing every input, weight and stage output.
Stages forward_stages(const Example& e, TensorPrinter& p);
// The backward pass in reverse, from L, each stage's backward fed the gradient printed before
// it; leaves the gradients in the stage inputs, the weights and the example's inputs.
void backward_stages(const Example& e, Stages& s, TensorPrinter& p);
// One line: whether every row of the gradient g (summed over its last axis) is 0 up to rounding
// (1e-12), and the largest |row sum|: "row sums of dS: all 0 up to rounding (largest |row sum| 2.8e-17)".
void print_row_sums(const std::string& name, const Tensor& g, TensorPrinter& p);

} // namespace headgrad::cli::explain
