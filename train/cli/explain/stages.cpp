#include "train/cli/explain/stages.hpp"

#include <cmath>
#include <fmt/format.h>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::cli::explain {
namespace {

// A fresh leaf holding t's values: the start of the next stage.
Tensor leaf_of(const Tensor& t) {
  Tensor l = t.detach().contiguous(); // shares t's values, no history
  l.set_requires_grad(true);
  return l;
}

void print_inputs(const Example& e, TensorPrinter& p) {
  p.tensor("queries", e.queries, "(B, Tq, query_size)");
  p.tensor("keys", e.keys, "(B, Tk, key_size)");
  p.tensor("values", e.values, "(B, Tk, value_size)");
  for (const auto& [name, prm] : e.mha->named_parameters())
    p.tensor(name, prm, name == "W_q.weight" ? "(num_hiddens, query_size); y = x W^T + b" : "");
}

// A projection's bias gradient, when it has a bias: db = dY summed over every row.
void print_bias_grad(const nn::Linear& layer, const std::string& name, const std::string& dy, TensorPrinter& p) {
  if (layer.bias.defined()) p.tensor(fmt::format("d {}.bias = column sums of {}", name, dy), layer.bias.grad());
}

// 1. the projections and 2. transpose_qkv: each head gets d columns.
void project_and_split(const Example& e, Stages& s, TensorPrinter& p) {
  s.Q = e.mha->W_q->forward(e.queries);
  s.K = e.mha->W_k->forward(e.keys);
  s.V = e.mha->W_v->forward(e.values);
  p.tensor("Q = W_q(queries)", s.Q, "(B, Tq, num_hiddens)");
  p.tensor("K = W_k(keys)", s.K, "(B, Tk, num_hiddens)");
  p.tensor("V = W_v(values)", s.V, "(B, Tk, num_hiddens)");

  s.Q_in = leaf_of(s.Q);
  s.K_in = leaf_of(s.K);
  s.V_in = leaf_of(s.V);
  s.Qh = models::transpose_qkv(s.Q_in, e.H);
  s.Kh = models::transpose_qkv(s.K_in, e.H);
  s.Vh = models::transpose_qkv(s.V_in, e.H);
  for (std::int64_t hh = 0; hh < e.H; ++hh)
    p.line(fmt::format("head {} takes columns {}..{} of Q, K and V; batch row b of head {} is row b*{} + {} below", hh,
                       hh * e.d, hh * e.d + e.d - 1, hh, e.H, hh));
  p.tensor("Q after transpose_qkv", s.Qh, "(B*H, Tq, d)");
  p.tensor("K after transpose_qkv", s.Kh, "(B*H, Tk, d)");
  p.tensor("V after transpose_qkv", s.Vh, "(B*H, Tk, d)");
}

// 3. the scores, 4. the masked softmax and 5. the weighted sum of the values, per head.
void attend(const Example& e, Stages& s, TensorPrinter& p) {
  s.Qh_in = leaf_of(s.Qh);
  s.Kh_in = leaf_of(s.Kh);
  s.Vh_in = leaf_of(s.Vh);
  const double sqrt_d = std::sqrt(static_cast<double>(e.d));
  // the 1/sqrt(d) is matmul's scale (the gemm's alpha), as in DotProductAttention
  s.scores = ops::matmul(s.Qh_in, s.Kh_in.transpose(1, 2), 1.0 / sqrt_d);
  p.tensor("scores = Q K^T / sqrt(d)", s.scores, fmt::format("(B*H, Tq, Tk), sqrt(d) = {:.4f}", sqrt_d));

  s.lens = models::repeat_interleave(e.valid_lens, e.H);
  p.line(fmt::format("valid_lens repeated per head (repeat_interleave): {}", fmt::join(s.lens.to_int_vector(), ", ")));
  s.scores_in = leaf_of(s.scores);
  s.weights = ops::masked_softmax(s.scores_in, s.lens);
  p.tensor("weights = masked_softmax(scores, valid_lens)", s.weights,
           "keys at positions >= valid_len are masked: weight exactly 0");

  s.weights_in = leaf_of(s.weights);
  s.heads_out = ops::matmul(s.weights_in, s.Vh_in);
  p.tensor("per-head outputs = weights V", s.heads_out, "(B*H, Tq, d)");
}

// 6. transpose_output (the heads side by side again) and 7. the output projection.
void combine(const Example& e, Stages& s, TensorPrinter& p) {
  s.heads_in = leaf_of(s.heads_out);
  s.concat = models::transpose_output(s.heads_in, e.H);
  p.tensor("transpose_output (heads side by side)", s.concat, "(B, Tq, num_hiddens)");
  s.concat_in = leaf_of(s.concat);
  s.output = e.mha->W_o->forward(s.concat_in);
  p.tensor("output = W_o(concat)", s.output, "(B, Tq, num_hiddens)");
}

} // namespace

Stages forward_stages(const Example& e, TensorPrinter& p) {
  p.heading("forward");
  print_inputs(e, p);
  Stages s;
  project_and_split(e, s, p);
  attend(e, s, p);
  combine(e, s, p);
  return s;
}

void backward_stages(const Example& e, Stages& s, TensorPrinter& p) {
  const models::MultiHeadAttention& mha = *e.mha;
  p.heading("backward (each stage receives the gradient printed just before it)");
  if (!e.pytorch.empty()) p.line("each gradient beside PyTorch's (the fixture's grad.* tensors) and the difference");
  // a gradient, beside PyTorch's value of it when the example came from a fixture
  auto grad = [&](const std::string& title, const Tensor& g, const std::string& note, const std::string& name) {
    p.gradient(title, g, note, e.pytorch_grad(name), name);
  };
  p.gradient("dL/d output = R", e.R, "", e.pytorch_grad("grad_output"), "grad_output");
  s.output.backward(e.R);
  grad("d concat = dY W_o", s.concat_in.grad(), "linear backward: dx = dy W", "grad.concat");
  grad("d W_o.weight = dY^T concat", mha.W_o->weight.grad(), "summed over batch and queries", "grad.W_o.weight");
  print_bias_grad(*mha.W_o, "W_o", "dY", p);
  s.concat.backward(s.concat_in.grad());
  grad("d per-head outputs (transpose_output backward = inverse permutation)", s.heads_in.grad(), "(B*H, Tq, d)",
       "grad.heads_out");
  s.heads_out.backward(s.heads_in.grad());
  grad("d weights = d_out V^T", s.weights_in.grad(), "(B*H, Tq, Tk)", "grad.weights");
  grad("d V (per head) = weights^T d_out", s.Vh_in.grad(), "(B*H, Tk, d); masked keys get 0", "grad.V_heads");
  s.weights.backward(s.weights_in.grad());
  grad("d scores = w * (dw - rowsum(dw * w))", s.scores_in.grad(), "masked entries: w = 0, so 0", "grad.scores");
  s.scores.backward(s.scores_in.grad());
  grad("d Q (per head) = d_scores K / sqrt(d)", s.Qh_in.grad(), "(B*H, Tq, d)", "grad.Q_heads");
  grad("d K (per head) = d_scores^T Q / sqrt(d)", s.Kh_in.grad(), "(B*H, Tk, d)", "grad.K_heads");
  s.Qh.backward(s.Qh_in.grad());
  s.Kh.backward(s.Kh_in.grad());
  s.Vh.backward(s.Vh_in.grad());
  grad("d Q (transpose_qkv backward)", s.Q_in.grad(), "(B, Tq, num_hiddens)", "grad.Q");
  grad("d K", s.K_in.grad(), "(B, Tk, num_hiddens)", "grad.K");
  grad("d V", s.V_in.grad(), "(B, Tk, num_hiddens)", "grad.V");
  s.Q.backward(s.Q_in.grad());
  s.K.backward(s.K_in.grad());
  s.V.backward(s.V_in.grad());
  grad("d W_q.weight = dQ^T queries", mha.W_q->weight.grad(), "", "grad.W_q.weight");
  grad("d W_k.weight = dK^T keys", mha.W_k->weight.grad(), "", "grad.W_k.weight");
  grad("d W_v.weight = dV^T values", mha.W_v->weight.grad(), "", "grad.W_v.weight");
  print_bias_grad(*mha.W_q, "W_q", "dQ", p);
  print_bias_grad(*mha.W_k, "W_k", "dK", p);
  print_bias_grad(*mha.W_v, "W_v", "dV", p);
  grad("d queries = dQ W_q", e.queries.grad(), "", "grad.queries");
  grad("d keys = dK W_k", e.keys.grad(), "", "grad.keys");
  grad("d values = dV W_v", e.values.grad(), "", "grad.values");
}

} // namespace headgrad::cli::explain
