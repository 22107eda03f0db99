// attention_forward.hpp - what the attention-backward exercise (attention_backward.cpp) and its
// solution share: the forward, written out op by op (struct Forward holds every tensor with its
// shape, attention_forward() computes them), the nine step functions you write (declared here,
// defined in attention_backward.cpp), your whole backward chained from them, and the check that
// runs each step against autograd.
#pragma once
#include <cmath>

#include "docs/exercises/exercise_check.hpp"
#include "framework/core/random.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "models/attention.hpp"

using headgrad::Tensor;
namespace ops = headgrad::ops;
namespace models = headgrad::models;

// ---- the forward ---------------------------------------------------------------------------------
// d2l's multi-head attention(X, Z, Z, valid_lens): queries from X, keys and values from one Z.
struct Forward {
  std::int64_t B = 0, Tq = 0, Tk = 0; // batch, queries, keys (= values)
  std::int64_t Fq = 0, Fk = 0;        // the features of X and of Z
  std::int64_t h = 0, H = 0, d = 0;   // num_hiddens, heads, d = h / H per head
  double s = 0;                       // the score scale 1/sqrt(d)
  double p = 0;                       // dropout on the attention weights, with the fixed mask M
  Tensor X;                  // (B, Tq, Fq)    the queries' input
  Tensor Z;                  // (B, Tk, Fk)    the input of keys and values
  Tensor valid_lens;         // (B) or (B, Tq) int64: key j is masked for query i when j >= its length
  Tensor W_q, W_k, W_v, W_o; // (h, Fq), (h, Fk), (h, Fk), (h, h): nn.Linear's (out, in) layout, no bias
  Tensor Q, K, V;            // (B, Tq, h), (B, Tk, h), (B, Tk, h)   Q = X W_qᵀ, K = Z W_kᵀ, V = Z W_vᵀ
  Tensor Qh, Kh, Vh;         // (B*H, Tq, d), (B*H, Tk, d) x 2   transpose_qkv: row b*H + i is head i of batch row b
  Tensor lens;               // (B*H) or (B*H, Tq)   valid_lens repeated per head
  Tensor S;                  // (B*H, Tq, Tk)  the scores, s Qh Khᵀ
  Tensor P;                  // (B*H, Tq, Tk)  the attention weights, masked_softmax(S, lens): 0 at masked keys
  Tensor M;                  // (B*H, Tq, Tk)  the dropout mask: 1 keeps a weight, 0 drops it (all 1 when p = 0)
  Tensor A;                  // (B*H, Tq, Tk)  dropout(P) = P ⊙ M / (1 - p)
  Tensor O;                  // (B*H, Tq, d)   the heads' outputs, A Vh
  Tensor C;                  // (B, Tq, h)     transpose_output(O): the heads side by side
  Tensor Y;                  // (B, Tq, h)     the output, C W_oᵀ
};

// The forward of d2l's MultiHeadAttention (its composed ops, as models/attention.cpp runs them),
// one op a line, with attention dropout p under the fixed mask M (undefined: all ones).
inline Forward attention_forward(const Tensor& X, const Tensor& Z, const Tensor& valid_lens, const Tensor& W_q,
                                 const Tensor& W_k, const Tensor& W_v, const Tensor& W_o, std::int64_t H,
                                 double p = 0, const Tensor& M = Tensor()) {
  Forward f;
  f.B = X.shape()[0];
  f.Tq = X.shape()[1];
  f.Tk = Z.shape()[1];
  f.Fq = X.shape()[2];
  f.Fk = Z.shape()[2];
  f.h = W_q.shape()[0];
  f.H = H;
  f.d = f.h / H;
  f.s = 1.0 / std::sqrt(static_cast<double>(f.d));
  f.p = p;
  f.X = X;
  f.Z = Z;
  f.valid_lens = valid_lens;
  f.W_q = W_q;
  f.W_k = W_k;
  f.W_v = W_v;
  f.W_o = W_o;
  f.Q = ops::linear(X, W_q);
  f.K = ops::linear(Z, W_k);
  f.V = ops::linear(Z, W_v);
  f.Qh = models::transpose_qkv(f.Q, H);
  f.Kh = models::transpose_qkv(f.K, H);
  f.Vh = models::transpose_qkv(f.V, H);
  f.lens = models::repeat_interleave(valid_lens, H);
  f.S = ops::matmul(f.Qh, f.Kh.transpose(1, 2), f.s);
  f.P = ops::masked_softmax(f.S, f.lens);
  f.M = M.defined() ? M : Tensor::ones(f.P.shape(), f.P.dtype());
  f.A = p > 0 ? ops::dropout_with_mask(f.P, f.M, p) : f.P;
  f.O = ops::matmul(f.A, f.Vh);
  f.C = models::transpose_output(f.O, H);
  f.Y = ops::linear(f.C, W_o);
  return f;
}

// ---- your backward (attention_backward.cpp): one function per step, from dY back to X and Z ------
void step_W_o(const Forward& f, const Tensor& dY, Tensor& dC, Tensor& dW_o);
void step_transpose_output(const Forward& f, const Tensor& dC, Tensor& dO);
void step_AV(const Forward& f, const Tensor& dO, Tensor& dA, Tensor& dVh);
void step_dropout(const Forward& f, const Tensor& dA, Tensor& dP);
void step_softmax(const Forward& f, const Tensor& dO, const Tensor& dP, Tensor& D, Tensor& dS);
void step_scores(const Forward& f, const Tensor& dS, Tensor& dQh, Tensor& dKh);
void step_transpose_qkv(const Forward& f, const Tensor& dQh, const Tensor& dKh, const Tensor& dVh, Tensor& dQ,
                        Tensor& dK, Tensor& dV);
void step_projection_weights(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dW_q,
                             Tensor& dW_k, Tensor& dW_v);
void step_inputs(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dX, Tensor& dZ);

// Every tensor your steps compute.
struct YourGradients {
  Tensor dC, dW_o, dO, dA, dVh, dP, D, dS, dQh, dKh, dQ, dK, dV, dW_q, dW_k, dW_v, dX, dZ;
};

// Your whole backward: the nine steps chained, each on what the one before it computed.
inline YourGradients your_backward(const Forward& f, const Tensor& dY) {
  YourGradients g;
  step_W_o(f, dY, g.dC, g.dW_o);
  step_transpose_output(f, g.dC, g.dO);
  step_AV(f, g.dO, g.dA, g.dVh);
  step_dropout(f, g.dA, g.dP);
  step_softmax(f, g.dO, g.dP, g.D, g.dS);
  step_scores(f, g.dS, g.dQh, g.dKh);
  step_transpose_qkv(f, g.dQh, g.dKh, g.dVh, g.dQ, g.dK, g.dV);
  step_projection_weights(f, g.dQ, g.dK, g.dV, g.dW_q, g.dW_k, g.dW_v);
  step_inputs(f, g.dQ, g.dK, g.dV, g.dX, g.dZ);
  return g;
}

// ---- the check: every step against autograd -------------------------------------------------------
// Cross-attention with Tq != Tk and Fq != Fk (so a missing transpose shows in a shape), one valid
// length per query (a 2-D mask) and attention dropout with a fixed mask. Autograd differentiates
// its own copy of the forward, built on leaves; your steps get another copy, of the same values,
// built on tensors that carry no gradient and no graph: what you hand back is what you computed.
// Each step runs on autograd's gradient of what its forward produced, and each tensor it computed
// is compared with autograd's (Report: one line per tensor). Returns the exit code: 0 when every
// one passes.
inline int check_your_backward() {
  constexpr auto f64 = headgrad::DType::f64;
  headgrad::Generator gen(0);
  const std::int64_t B = 2, Tq = 3, Tk = 5, Fq = 4, Fk = 5, h = 6, H = 2;
  const double p = 0.25;
  // d2l's 0.17 signature (key_size, query_size, value_size, num_hiddens, num_heads, dropout, bias)
  models::MultiHeadAttention mha(Fk, Fq, Fk, h, H, 0.0, false, gen, f64);
  const Tensor X = Tensor::normal({B, Tq, Fq}, 0, 1, gen, f64);
  const Tensor Z = Tensor::normal({B, Tk, Fk}, 0, 1, gen, f64);
  const Tensor valid_lens = Tensor::from_ints({3, 5, 1, 4, 2, 5}, {B, Tq}); // one length per query
  Tensor M = Tensor::zeros({B * H, Tq, Tk}, f64);
  for (std::int64_t i = 0; i < M.numel(); ++i) M.data<double>()[i] = gen.uniform() < p ? 0.0 : 1.0;
  const Tensor R = Tensor::normal({B, Tq, h}, 0, 1, gen, f64);
  const Tensor W[4] = {mha.W_q->weight, mha.W_k->weight, mha.W_v->weight, mha.W_o->weight};

  // autograd's copy: every input and weight a leaf; L = sum(Y ⊙ R), so dL/dY = R
  auto leaf = [](const Tensor& t) { return t.detach().clone().set_requires_grad(); };
  const Forward ref = attention_forward(leaf(X), leaf(Z), valid_lens, leaf(W[0]), leaf(W[1]), leaf(W[2]),
                                        leaf(W[3]), H, p, M);
  const Tensor L = ops::sum(ref.Y * R);
  // yours: the same values, without gradients
  Forward f;
  {
    headgrad::NoGradGuard no_grad;
    auto copy = [](const Tensor& t) { return t.detach().clone(); };
    f = attention_forward(copy(X), copy(Z), valid_lens, copy(W[0]), copy(W[1]), copy(W[2]), copy(W[3]), H, p,
                          copy(M));
  }
  exercise::Report report;
  {
    headgrad::NoGradGuard no_grad;
    report.require("the forward written out (no dropout) = models::MultiHeadAttention's",
                   exercise::max_abs_diff(attention_forward(X, Z, valid_lens, W[0], W[1], W[2], W[3], H).Y,
                                          mha.forward(X, Z, Z, valid_lens)));
  }
  const auto g = exercise::autograd_gradients(
      L, {{"Y", ref.Y}, {"C", ref.C}, {"O", ref.O}, {"A", ref.A}, {"P", ref.P}, {"S", ref.S}, {"Qh", ref.Qh},
          {"Kh", ref.Kh}, {"Vh", ref.Vh}, {"Q", ref.Q}, {"K", ref.K}, {"V", ref.V}, {"X", ref.X}, {"Z", ref.Z},
          {"W_q", ref.W_q}, {"W_k", ref.W_k}, {"W_v", ref.W_v}, {"W_o", ref.W_o}});
  Tensor D_autograd; // the row term from autograd's dP: rowsum(dP ⊙ P), (B*H, Tq, 1)
  {
    headgrad::NoGradGuard no_grad;
    D_autograd = ops::sum(g.at("P") * f.P, {2}, true);
  }
  YourGradients y;
  report.step("1. W_o: Y = C W_o^T", [&] { step_W_o(f, g.at("Y"), y.dC, y.dW_o); });
  report.compare("dC", y.dC, g.at("C"));
  report.compare("dW_o", y.dW_o, g.at("W_o"));
  report.step("2. transpose_output: C = transpose_output(O)", [&] { step_transpose_output(f, g.at("C"), y.dO); });
  report.compare("dO", y.dO, g.at("O"));
  report.step("3. the weighted sum: O = A Vh", [&] { step_AV(f, g.at("O"), y.dA, y.dVh); });
  report.compare("dA", y.dA, g.at("A"));
  report.compare("dVh", y.dVh, g.at("Vh"));
  report.step("4. dropout: A = P * M / (1 - p)", [&] { step_dropout(f, g.at("A"), y.dP); });
  report.compare("dP", y.dP, g.at("P"));
  report.step("5. the masked softmax: P = masked_softmax(S, lens)",
              [&] { step_softmax(f, g.at("O"), g.at("P"), y.D, y.dS); });
  report.compare("D", y.D, D_autograd);
  report.compare("dS", y.dS, g.at("S"));
  report.step("6. the scaled scores: S = s Qh Kh^T", [&] { step_scores(f, g.at("S"), y.dQh, y.dKh); });
  report.compare("dQh", y.dQh, g.at("Qh"));
  report.compare("dKh", y.dKh, g.at("Kh"));
  report.step("7. transpose_qkv: Qh, Kh, Vh = transpose_qkv(Q, K, V)",
              [&] { step_transpose_qkv(f, g.at("Qh"), g.at("Kh"), g.at("Vh"), y.dQ, y.dK, y.dV); });
  report.compare("dQ", y.dQ, g.at("Q"));
  report.compare("dK", y.dK, g.at("K"));
  report.compare("dV", y.dV, g.at("V"));
  report.step("8. the projections' weights: Q = X W_q^T, K = Z W_k^T, V = Z W_v^T",
              [&] { step_projection_weights(f, g.at("Q"), g.at("K"), g.at("V"), y.dW_q, y.dW_k, y.dW_v); });
  report.compare("dW_q", y.dW_q, g.at("W_q"));
  report.compare("dW_k", y.dW_k, g.at("W_k"));
  report.compare("dW_v", y.dW_v, g.at("W_v"));
  report.step("9. the inputs: X read by W_q, Z by W_k and W_v",
              [&] { step_inputs(f, g.at("Q"), g.at("K"), g.at("V"), y.dX, y.dZ); });
  report.compare("dX", y.dX, g.at("X"));
  report.compare("dZ", y.dZ, g.at("Z"));
  return report.finish();
}
