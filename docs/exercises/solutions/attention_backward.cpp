// solutions/attention_backward.cpp - the solution of docs/exercises/attention_backward.cpp: the same
// file with every TODO filled in (diff the two to see the answers only).
//
// attention_backward.cpp - exercise: write the backward of multi-head self-attention yourself, one
// step at a time, and let autograd check every tensor you compute (Karpathy's "become a backprop
// ninja", makemore part 4, for attention).
//
//   ./dev.sh exercise attention-backward              builds this file alone and runs it
//   ./dev.sh exercise attention-backward --solution   the same for solutions/attention_backward.cpp
//
// The forward below is d2l's MultiHeadAttention with valid_lens
// (https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html), used as
// self-attention (one X for queries, keys and values), written out op by op in float64 on tiny
// shapes; main() checks it against models::MultiHeadAttention. The loss is L = sum(Y ⊙ R) for a
// fixed random R, so dL/dY = R.
//
// Your part: the eight step functions under "your backward". Each TODO(name) is one tensor to
// compute. A step receives the forward's tensors and autograd's gradient of what the step's
// forward produced, so each step is checked on its own, in any order. Run the program after each
// step: one line per tensor, max |yours - autograd's| and PASS (within 1e-10) or FAIL; the exit
// code is 0 only when every tensor passes.
//
// docs/backprop-through-attention.md derives every step; its glossary is the notation here:
// dZ = dL/dZ has Z's shape, P are the attention weights, s = 1/sqrt(d) the scale.
//
// What you can use (headgrad's ops, as torch in the notebook; nothing records a graph here):
//   ops::matmul(a, b)            batched over the leading axis; (B, T, h) @ (h, F) broadcasts the
//   ops::matmul(a, b, s)         right side; s scales the product (the gemm's alpha)
//   a.transpose(i, j), a.reshape({...}), a.permute({...})
//   a + b, a - b, a * b, a * 2.0 elementwise, broadcasting as NumPy
//   ops::sum(a, {axes}, keepdim) sum over axes
//   models::transpose_qkv(a, H), models::transpose_output(a, H)   (B, T, h) <-> (B*H, T, d)
#include <cmath>

#include "docs/exercises/exercise_check.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/random.hpp"
#include "models/attention.hpp"

using headgrad::Tensor;
namespace ops = headgrad::ops;
namespace models = headgrad::models;

// ---- the forward ---------------------------------------------------------------------------------
struct Forward {
  std::int64_t B = 2, T = 4, F = 5, h = 6, H = 2, d = 3; // batch, tokens, features, num_hiddens, heads, h / H
  double s = 1.0 / std::sqrt(3.0);                        // the score scale 1/sqrt(d)
  Tensor X;                  // (B, T, F)     the input: queries, keys and values
  Tensor valid_lens;         // (B) int64     key j of batch row b is masked when j >= valid_lens[b]
  Tensor W_q, W_k, W_v, W_o; // (h, F) x 3, (h, h): nn.Linear's (out, in) layout, no bias
  Tensor Q, K, V;            // (B, T, h)     Q = X W_qᵀ, K = X W_kᵀ, V = X W_vᵀ
  Tensor Qh, Kh, Vh;         // (B*H, T, d)   transpose_qkv: row b*H + i is head i of batch row b
  Tensor lens;               // (B*H)         valid_lens repeated per head
  Tensor S;                  // (B*H, T, T)   the scores, s Qh Khᵀ
  Tensor P;                  // (B*H, T, T)   the attention weights, masked_softmax(S, lens)
  Tensor O;                  // (B*H, T, d)   the heads' outputs, P Vh
  Tensor C;                  // (B, T, h)     transpose_output(O): the heads side by side
  Tensor Y;                  // (B, T, h)     the output, C W_oᵀ
  Tensor R;                  // (B, T, h)     fixed; L = sum(Y ⊙ R)
  Tensor L;                  // ()
};

Forward forward(models::MultiHeadAttention& mha, headgrad::Generator& gen) {
  Forward f;
  f.X = Tensor::normal({f.B, f.T, f.F}, 0, 1, gen, headgrad::DType::f64).set_requires_grad();
  f.valid_lens = Tensor::from_ints({3, 2}, {f.B});
  f.W_q = mha.W_q->weight;
  f.W_k = mha.W_k->weight;
  f.W_v = mha.W_v->weight;
  f.W_o = mha.W_o->weight;
  f.Q = ops::linear(f.X, f.W_q);
  f.K = ops::linear(f.X, f.W_k);
  f.V = ops::linear(f.X, f.W_v);
  f.Qh = models::transpose_qkv(f.Q, f.H);
  f.Kh = models::transpose_qkv(f.K, f.H);
  f.Vh = models::transpose_qkv(f.V, f.H);
  f.lens = models::repeat_interleave(f.valid_lens, f.H);
  f.S = ops::matmul(f.Qh, f.Kh.transpose(1, 2), f.s);
  f.P = ops::masked_softmax(f.S, f.lens);
  f.O = ops::matmul(f.P, f.Vh);
  f.C = models::transpose_output(f.O, f.H);
  f.Y = ops::linear(f.C, f.W_o);
  f.R = Tensor::normal({f.B, f.T, f.h}, 0, 1, gen, headgrad::DType::f64);
  f.L = ops::sum(f.Y * f.R);
  return f;
}

// ---- your backward: one function per step, from the loss back to X -----------------------------

// 1. W_o. Forward: Y = C W_oᵀ (a linear layer without bias over the B*T rows of C).
//    Given dY (B, T, h), compute dC (B, T, h) and dW_o (h, h), summed over every row.
void step_W_o(const Forward& f, const Tensor& dY, Tensor& dC, Tensor& dW_o) {
  dC = ops::matmul(dY, f.W_o);                                         // (B, T, h) @ (h, h): dC = dY W_o
  dW_o = ops::matmul(dY.reshape({-1, f.h}).transpose(0, 1), f.C.reshape({-1, f.h})); // (h, B*T) @ (B*T, h): dYᵀ C
}

// 2. transpose_output. Forward: C = transpose_output(O, H), a permutation of O's entries.
//    Given dC (B, T, h), compute dO (B*H, T, d).
void step_transpose_output(const Forward& f, const Tensor& dC, Tensor& dO) {
  dO = models::transpose_qkv(dC, f.H); // the inverse permutation: columns back into heads
}

// 3. The weighted sum. Forward: O = P Vh per head.
//    Given dO (B*H, T, d), compute dP (B*H, T, T) and dVh (B*H, T, d).
void step_PV(const Forward& f, const Tensor& dO, Tensor& dP, Tensor& dVh) {
  dP = ops::matmul(dO, f.Vh.transpose(1, 2)); // (T, d) @ (d, T) per head: dP = dO Vhᵀ
  dVh = ops::matmul(f.P.transpose(1, 2), dO); // (T, T) @ (T, d) per head: dVh = Pᵀ dO
}

// 4. The masked softmax. Forward: P = masked_softmax(S, lens), row by row; masked keys get P = 0.
//    Given dP (B*H, T, T), compute dS (B*H, T, T) without building the softmax's Jacobian.
void step_softmax(const Forward& f, const Tensor& dP, Tensor& dS) {
  // dS = P ⊙ (dP - rowsum(dP ⊙ P)); a masked key has P = 0, so its dS is 0
  dS = f.P * (dP - ops::sum(dP * f.P, {2}, true));
}

// 5. The scaled scores. Forward: S = s Qh Khᵀ per head.
//    Given dS (B*H, T, T), compute dQh (B*H, T, d) and dKh (B*H, T, d).
void step_scores(const Forward& f, const Tensor& dS, Tensor& dQh, Tensor& dKh) {
  dQh = ops::matmul(dS, f.Kh, f.s);                 // (T, T) @ (T, d) per head: dQh = s dS Kh
  dKh = ops::matmul(dS.transpose(1, 2), f.Qh, f.s); // (T, T) @ (T, d) per head: dKh = s dSᵀ Qh
}

// 6. transpose_qkv. Forward: Qh = transpose_qkv(Q, H), and the same for K and V.
//    Given dQh, dKh, dVh (B*H, T, d), compute dQ, dK, dV (B, T, h).
void step_transpose_qkv(const Forward& f, const Tensor& dQh, const Tensor& dKh, const Tensor& dVh, Tensor& dQ,
                        Tensor& dK, Tensor& dV) {
  dQ = models::transpose_output(dQh, f.H); // the inverse permutation: heads back into columns
  dK = models::transpose_output(dKh, f.H);
  dV = models::transpose_output(dVh, f.H);
}

// 7. W_q, W_k, W_v. Forward: Q = X W_qᵀ, K = X W_kᵀ, V = X W_vᵀ.
//    Given dQ, dK, dV (B, T, h), compute dW_q, dW_k, dW_v (h, F).
void step_projection_weights(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dW_q,
                             Tensor& dW_k, Tensor& dW_v) {
  const Tensor X = f.X.reshape({-1, f.F}); // (B*T, F): the rows every projection read
  dW_q = ops::matmul(dQ.reshape({-1, f.h}).transpose(0, 1), X); // (h, B*T) @ (B*T, F): dQᵀ X
  dW_k = ops::matmul(dK.reshape({-1, f.h}).transpose(0, 1), X);
  dW_v = ops::matmul(dV.reshape({-1, f.h}).transpose(0, 1), X);
}

// 8. X. It was read three times, by the three projections: its gradient is the sum of three paths.
//    Given dQ, dK, dV (B, T, h), compute dX (B, T, F).
void step_X(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dX) {
  // the three paths add up: dX = dQ W_q + dK W_k + dV W_v, (B, T, h) @ (h, F) each
  dX = ops::matmul(dQ, f.W_q) + ops::matmul(dK, f.W_k) + ops::matmul(dV, f.W_v);
}

// ---- the check: every tensor you computed against autograd's --------------------------------------
int main() {
  headgrad::Generator gen(0);
  // d2l's signature (key_size, query_size, value_size, num_hiddens, num_heads, dropout, bias)
  models::MultiHeadAttention mha(5, 5, 5, 6, 2, 0.0, false, gen, headgrad::DType::f64);
  const Forward f = forward(mha, gen);
  exercise::Report report;
  {
    headgrad::NoGradGuard no_grad;
    report.require("the forward written out = models::MultiHeadAttention's",
                   exercise::max_abs_diff(f.Y, mha.forward(f.X, f.X, f.X, f.valid_lens)));
  }
  // autograd's gradients of every tensor of the forward
  const auto g = exercise::autograd_gradients(
      f.L, {{"Y", f.Y}, {"C", f.C}, {"O", f.O}, {"P", f.P}, {"S", f.S}, {"Qh", f.Qh}, {"Kh", f.Kh}, {"Vh", f.Vh},
            {"Q", f.Q}, {"K", f.K}, {"V", f.V}, {"X", f.X}, {"W_q", f.W_q}, {"W_k", f.W_k}, {"W_v", f.W_v},
            {"W_o", f.W_o}});
  Tensor dC, dW_o, dO, dP, dVh, dS, dQh, dKh, dQ, dK, dV, dW_q, dW_k, dW_v, dX;
  report.step("1. W_o: Y = C W_o^T", [&] { step_W_o(f, g.at("Y"), dC, dW_o); });
  report.compare("dC", dC, g.at("C"));
  report.compare("dW_o", dW_o, g.at("W_o"));
  report.step("2. transpose_output: C = transpose_output(O)", [&] { step_transpose_output(f, g.at("C"), dO); });
  report.compare("dO", dO, g.at("O"));
  report.step("3. the weighted sum: O = P Vh", [&] { step_PV(f, g.at("O"), dP, dVh); });
  report.compare("dP", dP, g.at("P"));
  report.compare("dVh", dVh, g.at("Vh"));
  report.step("4. the masked softmax: P = masked_softmax(S, lens)", [&] { step_softmax(f, g.at("P"), dS); });
  report.compare("dS", dS, g.at("S"));
  report.step("5. the scaled scores: S = s Qh Kh^T", [&] { step_scores(f, g.at("S"), dQh, dKh); });
  report.compare("dQh", dQh, g.at("Qh"));
  report.compare("dKh", dKh, g.at("Kh"));
  report.step("6. transpose_qkv: Qh, Kh, Vh = transpose_qkv(Q, K, V)",
              [&] { step_transpose_qkv(f, g.at("Qh"), g.at("Kh"), g.at("Vh"), dQ, dK, dV); });
  report.compare("dQ", dQ, g.at("Q"));
  report.compare("dK", dK, g.at("K"));
  report.compare("dV", dV, g.at("V"));
  report.step("7. the projections' weights: Q = X W_q^T, K = X W_k^T, V = X W_v^T",
              [&] { step_projection_weights(f, g.at("Q"), g.at("K"), g.at("V"), dW_q, dW_k, dW_v); });
  report.compare("dW_q", dW_q, g.at("W_q"));
  report.compare("dW_k", dW_k, g.at("W_k"));
  report.compare("dW_v", dW_v, g.at("W_v"));
  report.step("8. X, read by all three projections", [&] { step_X(f, g.at("Q"), g.at("K"), g.at("V"), dX); });
  report.compare("dX", dX, g.at("X"));
  return report.finish();
}
