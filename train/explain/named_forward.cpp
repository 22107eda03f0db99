#include "train/explain/named_forward.hpp"

#include <cmath>
#include <fmt/format.h>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::cli::explain {

NamedForward named_forward(const Example& e) {
  NamedForward r;
  const models::MultiHeadAttention& mha = *e.mha;
  auto named = [&r](const Tensor& t, const std::string& name) {
    r.results.push_back({name, t});
    return t;
  };
  const bool self = e.self_attention;
  const Tensor Q = named(mha.W_q->forward(e.queries), self ? "Q = W_q(X)" : "Q = W_q(queries)");
  const Tensor K = named(mha.W_k->forward(e.keys), self ? "K = W_k(X)" : "K = W_k(keys)");
  const Tensor V = named(mha.W_v->forward(e.values), self ? "V = W_v(X)" : "V = W_v(values)");
  // transpose_qkv (models/attention.cpp), line by line
  auto split = [&](const Tensor& X, const std::string& n) {
    const std::int64_t T = X.shape()[1];
    Tensor Y = named(X.reshape({e.B, T, e.H, -1}), n + " split into heads (B, T, H, d)");
    Y = named(Y.permute({0, 2, 1, 3}), n + " heads first (B, H, T, d)");
    return named(Y.reshape({-1, Y.shape()[2], Y.shape()[3]}), fmt::format("{0}h = transpose_qkv({0}) (B*H, T, d)", n));
  };
  const Tensor Qh = split(Q, "Q"), Kh = split(K, "K"), Vh = split(V, "V");
  const Tensor lens = models::repeat_interleave(e.valid_lens, e.H);
  // DotProductAttention (models/attention.cpp)
  const double s = 1.0 / std::sqrt(static_cast<double>(e.d));
  const Tensor Kt = named(Kh.transpose(1, 2), "Kh^T (B*H, d, Tk), a view of Kh");
  const Tensor S =
      named(ops::matmul(Qh, Kt, s), fmt::format("scores S = s Qh Kh^T, s = 1/sqrt({}) = {:.4g}", e.d, s));
  const Tensor P = named(ops::masked_softmax(S, lens), "weights P = masked_softmax(S)");
  const Tensor A = e.p > 0 ? named(ops::dropout_with_mask(P, e.drop_mask, e.p),
                                   fmt::format("A = dropout(P): P * mask / (1 - {})", e.p))
                           : P;
  const Tensor O = named(ops::matmul(A, Vh), e.p > 0 ? "O = A Vh, per head" : "O = P Vh, per head");
  // transpose_output (models/attention.cpp), line by line
  Tensor C = named(O.reshape({-1, e.H, O.shape()[1], O.shape()[2]}), "O per batch row (B, H, Tq, d)");
  C = named(C.permute({0, 2, 1, 3}), "O queries first (B, Tq, H, d)");
  C = named(C.reshape({C.shape()[0], C.shape()[1], -1}), "C = transpose_output(O), heads side by side");
  r.output = named(mha.W_o->forward(C), "Y = W_o(C), the output");
  r.loss = e.loss(r.output);
  if (e.cross_entropy) named(r.loss, "L = cross_entropy(Y, targets, mask)");
  return r;
}

} // namespace headgrad::cli::explain
