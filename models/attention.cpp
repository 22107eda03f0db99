// attention.cpp - read it next to d2l.ai's "Multi-Head Attention" chapter: each function follows
// its code line by line.
#include "models/attention.hpp"

#include <cmath>
#include <fmt/format.h>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::models {

Tensor transpose_qkv(const Tensor& X, std::int64_t num_heads) {
  // X: (batch_size, T, num_hiddens)
  if (X.dim() != 3)
    throw std::invalid_argument(fmt::format("transpose_qkv: X must be (batch, T, num_hiddens), got {}", X.shape()));
  if (num_heads <= 0 || X.shape()[2] % num_heads != 0)
    throw std::invalid_argument(fmt::format("transpose_qkv: num_hiddens = {} is not divisible by num_heads = {} (X {})",
                                            X.shape()[2], num_heads, X.shape()));
  const std::int64_t B = X.shape()[0], T = X.shape()[1];
  // (batch_size, T, num_heads, num_hiddens / num_heads)
  Tensor Y = X.reshape({B, T, num_heads, -1});
  // (batch_size, num_heads, T, num_hiddens / num_heads)
  Y = Y.permute({0, 2, 1, 3});
  // (batch_size * num_heads, T, num_hiddens / num_heads)
  return Y.reshape({-1, Y.shape()[2], Y.shape()[3]});
}

Tensor transpose_output(const Tensor& X, std::int64_t num_heads) {
  // X: (batch_size * num_heads, T, num_hiddens / num_heads)
  if (X.dim() != 3)
    throw std::invalid_argument(fmt::format("transpose_output: X must be (batch * heads, T, d), got {}", X.shape()));
  if (num_heads <= 0 || X.shape()[0] % num_heads != 0)
    throw std::invalid_argument(fmt::format("transpose_output: batch * heads = {} is not divisible by num_heads = {}",
                                            X.shape()[0], num_heads));
  // (batch_size, num_heads, T, num_hiddens / num_heads)
  Tensor Y = X.reshape({-1, num_heads, X.shape()[1], X.shape()[2]});
  // (batch_size, T, num_heads, num_hiddens / num_heads)
  Y = Y.permute({0, 2, 1, 3});
  // (batch_size, T, num_hiddens)
  return Y.reshape({Y.shape()[0], Y.shape()[1], -1});
}

Tensor repeat_interleave(const Tensor& valid_lens, std::int64_t repeats) {
  if (valid_lens.dtype() != DType::i64 || valid_lens.dim() < 1 || valid_lens.dim() > 2)
    throw std::invalid_argument(fmt::format("repeat_interleave: valid_lens must be int64 (B) or (B, Tq), got {} {}",
                                            valid_lens.shape(), dtype_name(valid_lens.dtype())));
  const auto v = valid_lens.to_int_vector();
  const std::int64_t B = valid_lens.shape()[0];
  const std::int64_t row = B == 0 ? 0 : static_cast<std::int64_t>(v.size()) / B; // 1 or Tq
  Dims shape = valid_lens.shape();
  shape[0] = B * repeats;
  std::vector<std::int64_t> out;
  out.reserve(v.size() * static_cast<std::size_t>(repeats));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t r = 0; r < repeats; ++r) // entry b repeated for heads 0..repeats-1
      out.insert(out.end(), v.begin() + b * row, v.begin() + (b + 1) * row);
  return Tensor::from_ints(out, shape);
}

Tensor dot_product_attention(const Tensor& queries, const Tensor& keys, const Tensor& values,
                             const ops::AttentionMask& mask, nn::Dropout& dropout, Tensor& weights_out) {
  // queries: (B', Tq, d); keys: (B', Tk, d); values: (B', Tk, dv)
  if (queries.dim() != 3 || keys.dim() != 3 || values.dim() != 3 || queries.shape()[2] != keys.shape()[2] ||
      keys.shape()[1] != values.shape()[1] || queries.shape()[0] != keys.shape()[0] ||
      keys.shape()[0] != values.shape()[0])
    throw std::invalid_argument(fmt::format("DotProductAttention: shapes do not fit: queries {}, keys {}, values {}",
                                            queries.shape(), keys.shape(), values.shape()));
  const double d = static_cast<double>(queries.shape()[2]);
  // scores: (B', Tq, Tk) = Q K^T / sqrt(d); K^T is a transpose view, BLAS reads it with a flag,
  // and the 1/sqrt(d) is the gemm's alpha (d2l writes a separate division: same value)
  Tensor scores = ops::matmul(queries, keys.transpose(1, 2), 1.0 / std::sqrt(d));
  // weights: (B', Tq, Tk), zero at masked keys
  Tensor weights = ops::masked_softmax(scores, mask);
  weights_out = weights.detach();
  // (B', Tq, dv)
  return ops::matmul(dropout.forward(weights), values);
}

DotProductAttention::DotProductAttention(double p, std::uint64_t seed) {
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, seed));
}

Tensor DotProductAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                    const Tensor& valid_lens) {
  ops::AttentionMask mask;
  mask.valid_lens = valid_lens;
  return dot_product_attention(queries, keys, values, mask, *dropout, attention_weights);
}

const Tensor& AttentionWeights::get(const char* who) const {
  if (!last.defined())
    throw std::logic_error(fmt::format("{}: the last forward kept no attention weights (the fused path keeps them "
                                       "only when asked: keep_attention_weights(true), or the layer's weights.keep, "
                                       "before the forward)",
                                       who));
  return last;
}

namespace {

// d2l's MultiHeadAttention.forward between its projections and W_o, op by op.
Tensor attend_composed(const Projected& x, std::int64_t num_heads, const ops::AttentionMask& mask,
                       nn::Dropout& dropout, AttentionWeights& weights) {
  Tensor q = x.q, k = x.k, v = x.v; // (batch_size, Tq or Tk, num_hiddens)
  if (x.qkv.defined()) {            // the packed [q | k | v] of self-attention, read as its column blocks
    const std::int64_t C = x.qkv.shape()[2] / 3;
    q = x.qkv.slice(2, 0, C);
    k = x.qkv.slice(2, C, 2 * C);
    v = x.qkv.slice(2, 2 * C, 3 * C);
  }
  // After transpose_qkv: (batch_size * num_heads, Tq or Tk, num_hiddens / num_heads)
  const Tensor qh = transpose_qkv(q, num_heads), kh = transpose_qkv(k, num_heads), vh = transpose_qkv(v, num_heads);
  const std::int64_t B = q.shape()[0], Tq = q.shape()[1], Tk = k.shape()[1];
  // the mask of (batch_size, ...) repeated per head: (batch_size * num_heads, ...)
  const ops::AttentionMask per_head = ops::repeat_per_head(mask, B, num_heads, Tq, Tk, "attention");
  // output: (batch_size * num_heads, Tq, num_hiddens / num_heads); P: (batch_size * num_heads, Tq, Tk)
  Tensor P;
  const Tensor output = dot_product_attention(qh, kh, vh, per_head, dropout, P);
  weights.last = P.reshape({B, num_heads, Tq, Tk});
  // output_concat: (batch_size, Tq, num_hiddens)
  return transpose_output(output, num_heads);
}

} // namespace

Tensor multi_head_attention(const Projected& x, std::int64_t heads, const ops::AttentionMask& mask,
                            AttentionPath path, nn::Dropout& dropout, AttentionWeights& weights) {
  weights.last = Tensor(); // not the previous forward's
  if (path == AttentionPath::composed) return attend_composed(x, heads, mask, dropout, weights);
  // nn::Dropout is the identity outside training; in training the op draws from its generator
  const ops::AttentionDropout drop{dropout.training() ? dropout.p : 0.0, &dropout.gen};
  Tensor* keep = weights.keep ? &weights.last : nullptr;
  if (x.qkv.defined()) return ops::self_attention(x.qkv, heads, mask, keep, 0, drop);
  return ops::attention(x.q, x.k, x.v, heads, mask, keep, 0, drop);
}

MultiHeadAttention::MultiHeadAttention(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                                       std::int64_t num_hiddens_, std::int64_t num_heads_, double dropout, bool bias,
                                       Generator& gen, DType dtype)
    : num_heads(num_heads_), num_hiddens(num_hiddens_) {
  if (num_heads <= 0 || num_hiddens <= 0 || num_hiddens % num_heads != 0)
    throw std::invalid_argument(fmt::format("MultiHeadAttention: num_hiddens = {} must be a positive multiple of "
                                            "num_heads = {}", num_hiddens, num_heads));
  attention = register_module("attention", std::make_shared<DotProductAttention>(dropout, gen.next_u64()));
  W_q = register_module("W_q", std::make_shared<nn::Linear>(query_size, num_hiddens, bias, gen, dtype));
  W_k = register_module("W_k", std::make_shared<nn::Linear>(key_size, num_hiddens, bias, gen, dtype));
  W_v = register_module("W_v", std::make_shared<nn::Linear>(value_size, num_hiddens, bias, gen, dtype));
  W_o = register_module("W_o", std::make_shared<nn::Linear>(num_hiddens, num_hiddens, bias, gen, dtype));
}

MultiHeadAttention::MultiHeadAttention(std::int64_t embed_dim, std::int64_t num_heads_, Generator& gen, DType dtype)
    : num_heads(num_heads_), num_hiddens(embed_dim) {
  // assert self.head_dim * num_heads == embed_dim, "embed_dim must be divisible by num_heads"
  if (num_heads <= 0 || embed_dim <= 0 || embed_dim % num_heads != 0)
    throw std::invalid_argument(fmt::format("embed_dim must be divisible by num_heads (embed_dim = {}, num_heads = {})",
                                            embed_dim, num_heads));
  attention = register_module("attention", std::make_shared<DotProductAttention>(0.0));
  W_q = register_module("query", std::make_shared<nn::Linear>(embed_dim, embed_dim, true, gen, dtype));
  W_k = register_module("key", std::make_shared<nn::Linear>(embed_dim, embed_dim, true, gen, dtype));
  W_v = register_module("value", std::make_shared<nn::Linear>(embed_dim, embed_dim, true, gen, dtype));
  W_o = register_module("out", std::make_shared<nn::Linear>(embed_dim, embed_dim, true, gen, dtype));
}

Tensor MultiHeadAttention::forward(const Tensor& queries, const Tensor& keys, const Tensor& values,
                                   const Tensor& valid_lens) {
  // queries: (batch_size, Tq, query_size); keys: (batch_size, Tk, key_size);
  // values: (batch_size, Tk, value_size)
  if (queries.dim() != 3 || keys.dim() != 3 || values.dim() != 3 || queries.shape()[0] != keys.shape()[0] ||
      keys.shape()[0] != values.shape()[0] || keys.shape()[1] != values.shape()[1])
    throw std::invalid_argument(fmt::format("MultiHeadAttention: expected queries (B, Tq, q), keys (B, Tk, k), values "
                                            "(B, Tk, v); got {}, {}, {}",
                                            queries.shape(), keys.shape(), values.shape()));
  if (own) return own(*this, queries, keys, values, valid_lens);
  ops::AttentionMask mask;
  mask.valid_lens = valid_lens; // (batch_size) or (batch_size, Tq)
  // After the projections: (batch_size, Tq or Tk, num_hiddens). The composed path is d2l's code, three
  // projections; the fused one does self-attention's as one gemm over the stacked weights (still the
  // three parameters W_q, W_k and W_v), and the op reads q, k, v out of the packed result.
  Projected x;
  if (path == AttentionPath::fused && queries.same(keys) && keys.same(values)) {
    const Tensor W = ops::concat({W_q->weight, W_k->weight, W_v->weight}, 0);
    const Tensor b = W_q->bias.defined() ? ops::concat({W_q->bias, W_k->bias, W_v->bias}, 0) : Tensor();
    x.qkv = ops::linear(queries, W, b);
  } else {
    x.q = W_q->forward(queries);
    x.k = W_k->forward(keys);
    x.v = W_v->forward(values);
  }
  // (batch_size, Tq, num_hiddens)
  return W_o->forward(multi_head_attention(x, num_heads, mask, path, *attention->dropout, weights));
}

Tensor MultiHeadAttention::attention_weights() const { return weights.get("MultiHeadAttention::attention_weights"); }

} // namespace headgrad::models
