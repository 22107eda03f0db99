#include "train/explain/stages.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
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
  if (e.self_attention) {
    p.tensor("X", e.queries, "(B, T, num_hiddens): queries, keys and values at once (self-attention)");
  } else {
    p.tensor("queries", e.queries, "(B, Tq, query_size)");
    p.tensor("keys", e.keys, "(B, Tk, key_size)");
    p.tensor("values", e.values, "(B, Tk, value_size)");
  }
  for (const auto& [name, prm] : e.mha->named_parameters())
    p.tensor(name, prm, name == "W_q.weight" ? "(num_hiddens, query_size); y = x W^T + b" : "");
  if (e.causal)
    p.tensor("valid_lens", e.valid_lens,
             "(B, Tq), causal: query i keeps keys j <= i (and j < --valid-len), d2l's dec_valid_lens");
}

// A projection's bias gradient, when it has a bias: db = dY summed over every row.
void print_bias_grad(const nn::Linear& layer, const std::string& name, const std::string& dy, TensorPrinter& p) {
  if (layer.bias.defined()) p.tensor(fmt::format("d {}.bias = column sums of {}", name, dy), layer.bias.grad());
}

// 1. the projections and 2. transpose_qkv: each head gets d columns.
void project_and_split(const Example& e, Stages& s, TensorPrinter& p) {
  const bool self = e.self_attention;
  s.Q = e.mha->W_q->forward(e.queries);
  s.K = e.mha->W_k->forward(e.keys);
  s.V = e.mha->W_v->forward(e.values);
  p.tensor(self ? "Q = W_q(X)" : "Q = W_q(queries)", s.Q, "(B, Tq, num_hiddens)");
  p.tensor(self ? "K = W_k(X)" : "K = W_k(keys)", s.K, "(B, Tk, num_hiddens)");
  p.tensor(self ? "V = W_v(X)" : "V = W_v(values)", s.V, "(B, Tk, num_hiddens)");

  s.Q_in = leaf_of(s.Q);
  s.K_in = leaf_of(s.K);
  s.V_in = leaf_of(s.V);
  s.Qh = models::transpose_qkv(s.Q_in, e.H);
  s.Kh = models::transpose_qkv(s.K_in, e.H);
  s.Vh = models::transpose_qkv(s.V_in, e.H);
  for (std::int64_t hh = 0; hh < e.H; ++hh)
    p.line(fmt::format("head {} takes columns {}..{} of Q, K and V; batch row b of head {} is row b*{} + {} below", hh,
                       hh * e.d, hh * e.d + e.d - 1, hh, e.H, hh));
  p.tensor("Qh = transpose_qkv(Q)", s.Qh, "(B*H, Tq, d)");
  p.tensor("Kh = transpose_qkv(K)", s.Kh, "(B*H, Tk, d)");
  p.tensor("Vh = transpose_qkv(V)", s.Vh, "(B*H, Tk, d)");
}

// 3. the scores, 4. the masked softmax (and dropout) and 5. the weighted sum of the values.
void attend(const Example& e, Stages& s, TensorPrinter& p) {
  s.Qh_in = leaf_of(s.Qh);
  s.Kh_in = leaf_of(s.Kh);
  s.Vh_in = leaf_of(s.Vh);
  const double sqrt_d = std::sqrt(static_cast<double>(e.d));
  // the 1/sqrt(d) is matmul's scale (the gemm's alpha), as in DotProductAttention
  s.scores = ops::matmul(s.Qh_in, s.Kh_in.transpose(1, 2), 1.0 / sqrt_d);
  p.tensor("S = s Qh Kh^T (the scores)", s.scores,
           fmt::format("(B*H, Tq, Tk), s = 1/sqrt(d) = 1/{} = {}", format_value(sqrt_d, p.precision()),
                       format_value(1.0 / sqrt_d, p.precision())));

  s.lens = models::repeat_interleave(e.valid_lens, e.H);
  p.line(fmt::format("valid_lens repeated per head (repeat_interleave): {}", fmt::join(s.lens.to_int_vector(), ", ")));
  s.scores_in = leaf_of(s.scores);
  s.weights = ops::masked_softmax(s.scores_in, s.lens);
  p.tensor("P = masked_softmax(S, valid_lens) (the weights)", s.weights,
           e.causal ? "keys j > i or j >= valid_len are masked: weight exactly 0"
                    : "keys at positions >= valid_len are masked: weight exactly 0");

  s.weights_in = leaf_of(s.weights);
  Tensor weighted = s.weights_in;
  if (e.p > 0) {
    p.tensor(fmt::format("dropout mask m (1 keeps, 0 drops: each with probability p = {})", e.p),
             e.drop_mask.to(DType::i64), "(B*H, Tq, Tk), fixed, so every run and the gradient check see the same");
    s.dropped = ops::dropout_with_mask(s.weights_in, e.drop_mask, e.p);
    p.tensor("A = dropout(P) = P * m / (1 - p)", s.dropped,
             fmt::format("1/(1 - p) = {}: a kept weight is scaled up, so A's expected value is P",
                         format_value(1.0 / (1.0 - e.p), p.precision())));
    s.dropped_in = leaf_of(s.dropped);
    weighted = s.dropped_in;
  }
  s.heads_out = ops::matmul(weighted, s.Vh_in);
  p.tensor(e.p > 0 ? "O = A Vh (per-head outputs)" : "O = P Vh (per-head outputs)", s.heads_out, "(B*H, Tq, d)");
}

// 6. transpose_output (the heads side by side again), 7. the output projection and 8. the loss.
void combine(const Example& e, Stages& s, TensorPrinter& p) {
  s.heads_in = leaf_of(s.heads_out);
  s.concat = models::transpose_output(s.heads_in, e.H);
  p.tensor("C = transpose_output(O) (heads side by side)", s.concat, "(B, Tq, num_hiddens)");
  s.concat_in = leaf_of(s.concat);
  s.output = e.mha->W_o->forward(s.concat_in);
  p.tensor("Y = W_o(C) (the output)", s.output, "(B, Tq, num_hiddens)");
  s.output_in = leaf_of(s.output);
  s.loss = e.loss(s.output_in);
  if (!e.cross_entropy) return;
  p.tensor("targets", e.targets, "(B, Tq): a class in [0, num_hiddens) per position; Y are the logits");
  p.tensor("mask", e.loss_mask, "(B, Tq): position t counts when t < valid_len (1), else 0");
  const auto counted = e.loss_mask.to_int_vector();
  p.line(fmt::format("N = {} counted positions", std::count(counted.begin(), counted.end(), 1)));
  {
    NoGradGuard no_grad;
    p.tensor("softmax(Y)", ops::softmax(s.output), "(B, Tq, num_hiddens): what cross_entropy keeps");
  }
  p.tensor("L = cross_entropy(Y, targets, mask)", s.loss,
           "the mean over counted positions of logsumexp(Y) - Y[target] = -log softmax(Y)[target]");
}

// dX of self-attention: X was read by all three projections, so its gradient is the sum of three
// terms, each a linear layer's dx = dy W.
void print_self_attention_dx(const Example& e, const Stages& s, TensorPrinter& p) {
  const models::MultiHeadAttention& mha = *e.mha;
  Tensor terms[3];
  {
    NoGradGuard no_grad;
    terms[0] = ops::matmul(s.Q_in.grad(), mha.W_q->weight);
    terms[1] = ops::matmul(s.K_in.grad(), mha.W_k->weight);
    terms[2] = ops::matmul(s.V_in.grad(), mha.W_v->weight);
  }
  p.tensor("dX via Q = dQ W_q", terms[0], "(B, T, num_hiddens): what W_q's linear adds to dX");
  p.tensor("dX via K = dK W_k", terms[1], "what W_k's linear adds");
  p.tensor("dX via V = dV W_v", terms[2], "what W_v's linear adds");
  const Tensor dX = e.queries.grad();
  p.tensor("dX = dQ W_q + dK W_k + dV W_v", dX, "X's gradient as backward left it: the three added up");
  Tensor sum;
  {
    NoGradGuard no_grad;
    sum = terms[0] + terms[1] + terms[2];
  }
  p.line(fmt::format("the three terms added up vs dX: max abs diff {:.1e}", max_abs_diff(sum, dX)));
}

} // namespace

void print_row_sums(const std::string& name, const Tensor& g, TensorPrinter& p) {
  Tensor sums;
  {
    NoGradGuard no_grad;
    sums = ops::sum(g, {g.dim() - 1});
  }
  double largest = 0;
  for (double v : sums.to_vector()) largest = std::isnan(v) ? v : std::max(largest, std::abs(v));
  p.line(fmt::format("row sums of {}: {} (largest |row sum| {:.1e})", name,
                     largest <= 1e-12 ? "all 0 up to rounding" : "NOT all 0", largest));
}

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
  s.loss.backward();
  const Tensor dY = s.output_in.grad();
  if (e.cross_entropy)
    p.tensor("dY = (softmax(Y) - onehot(targets)) * mask / N", dY,
             "cross_entropy's backward; positions the mask leaves out get 0, every counted row sums to 0");
  else
    p.gradient("dY = R", dY, "dL/dY of L = sum(Y * R)", e.pytorch_grad("grad_output"), "grad_output");
  s.output.backward(dY);
  grad("dC = dY W_o", s.concat_in.grad(), "linear backward: dx = dy W", "grad.concat");
  grad("d W_o.weight = dY^T C", mha.W_o->weight.grad(), "summed over batch and queries", "grad.W_o.weight");
  print_bias_grad(*mha.W_o, "W_o", "dY", p);
  s.concat.backward(s.concat_in.grad());
  grad("dO = transpose_qkv(dC) (transpose_output backward = the inverse permutation)", s.heads_in.grad(),
       "(B*H, Tq, d)", "grad.heads_out");
  s.heads_out.backward(s.heads_in.grad());
  if (e.p > 0) {
    p.tensor("dA = dO Vh^T", s.dropped_in.grad(), "(B*H, Tq, Tk)");
    p.tensor("dVh = A^T dO", s.Vh_in.grad(), "(B*H, Tk, d); masked keys get 0, and so do dropped weights' shares");
    s.dropped.backward(s.dropped_in.grad());
    p.tensor("dP = dA * m / (1 - p)", s.weights_in.grad(), "dropout's backward: the same mask and scale");
  } else {
    grad("dP = dO Vh^T", s.weights_in.grad(), "(B*H, Tq, Tk): not 0 at masked keys", "grad.weights");
    grad("dVh = P^T dO", s.Vh_in.grad(), "(B*H, Tk, d); masked keys get 0", "grad.V_heads");
  }
  s.weights.backward(s.weights_in.grad());
  grad("dS = P * (dP - rowsum(dP * P))", s.scores_in.grad(), "masked entries: P = 0, so 0", "grad.scores");
  print_row_sums("dS", s.scores_in.grad(), p);
  s.scores.backward(s.scores_in.grad());
  grad("dQh = s dS Kh", s.Qh_in.grad(), "(B*H, Tq, d)", "grad.Q_heads");
  grad("dKh = s dS^T Qh", s.Kh_in.grad(), "(B*H, Tk, d)", "grad.K_heads");
  s.Qh.backward(s.Qh_in.grad());
  s.Kh.backward(s.Kh_in.grad());
  s.Vh.backward(s.Vh_in.grad());
  grad("dQ = transpose_output(dQh) (transpose_qkv backward)", s.Q_in.grad(), "(B, Tq, num_hiddens)", "grad.Q");
  grad("dK = transpose_output(dKh)", s.K_in.grad(), "(B, Tk, num_hiddens)", "grad.K");
  grad("dV = transpose_output(dVh)", s.V_in.grad(), "(B, Tk, num_hiddens)", "grad.V");
  s.Q.backward(s.Q_in.grad());
  s.K.backward(s.K_in.grad());
  s.V.backward(s.V_in.grad());
  const bool self = e.self_attention;
  grad(self ? "d W_q.weight = dQ^T X" : "d W_q.weight = dQ^T queries", mha.W_q->weight.grad(), "", "grad.W_q.weight");
  grad(self ? "d W_k.weight = dK^T X" : "d W_k.weight = dK^T keys", mha.W_k->weight.grad(), "", "grad.W_k.weight");
  grad(self ? "d W_v.weight = dV^T X" : "d W_v.weight = dV^T values", mha.W_v->weight.grad(), "", "grad.W_v.weight");
  print_bias_grad(*mha.W_q, "W_q", "dQ", p);
  print_bias_grad(*mha.W_k, "W_k", "dK", p);
  print_bias_grad(*mha.W_v, "W_v", "dV", p);
  if (self) {
    print_self_attention_dx(e, s, p);
    return;
  }
  grad("d queries = dQ W_q", e.queries.grad(), "", "grad.queries");
  grad("d keys = dK W_k", e.keys.grad(), "", "grad.keys");
  grad("d values = dV W_v", e.values.grad(), "", "grad.values");
}

} // namespace headgrad::cli::explain
