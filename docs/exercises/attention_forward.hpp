// attention_forward.hpp - what the attention-backward exercise (attention_backward.cpp) and its
// solution share: the forward, written out op by op (struct Forward holds every tensor with its
// shape, forward() computes them), the eight step functions you write (declared here, defined in
// attention_backward.cpp) and the check that runs them against autograd.
#pragma once
#include <cmath>

#include "docs/exercises/exercise_check.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
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

inline Forward forward(models::MultiHeadAttention& mha, headgrad::Generator& gen) {
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

// ---- your backward (attention_backward.cpp): one function per step, from the loss back to X -------
void step_W_o(const Forward& f, const Tensor& dY, Tensor& dC, Tensor& dW_o);
void step_transpose_output(const Forward& f, const Tensor& dC, Tensor& dO);
void step_PV(const Forward& f, const Tensor& dO, Tensor& dP, Tensor& dVh);
void step_softmax(const Forward& f, const Tensor& dP, Tensor& dS);
void step_scores(const Forward& f, const Tensor& dS, Tensor& dQh, Tensor& dKh);
void step_transpose_qkv(const Forward& f, const Tensor& dQh, const Tensor& dKh, const Tensor& dVh, Tensor& dQ,
                        Tensor& dK, Tensor& dV);
void step_projection_weights(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dW_q,
                             Tensor& dW_k, Tensor& dW_v);
void step_X(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dX);

// ---- the check: every tensor you computed against autograd's --------------------------------------
// The forward written out must equal models::MultiHeadAttention's; then every step runs on
// autograd's gradient of what its forward produced, and each tensor it computed is compared with
// autograd's own (Report: one line per tensor). Returns the exit code: 0 when every one passes.
inline int check_your_backward() {
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
