// attention.hpp - scaled dot-product attention and multi-head attention in two published forms,
// line by line: d2l's MultiHeadAttention with transpose_qkv / transpose_output (d2l.ai, "Multi-Head
// Attention": https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html)
// and the plain PyTorch self-attention module MultiHeadAttention(embed_dim, num_heads) with
// query/key/value/out linear layers, as PyTorch tutorials write it. Every tensor carries its
// shape in a comment.
#pragma once
#include <memory>

#include "framework/nn/layers.hpp"
#include "framework/nn/module.hpp"

namespace headgrad::models {

// (batch, T, num_heads * d) -> (batch * num_heads, T, d): head h of batch row b becomes row
// b * num_heads + h. Throws if the last dim is not divisible by num_heads.
Tensor transpose_qkv(const Tensor& X, std::int64_t num_heads);
// The inverse: (batch * num_heads, T, d) -> (batch, T, num_heads * d).
Tensor transpose_output(const Tensor& X, std::int64_t num_heads);
// torch.repeat_interleave(valid_lens, repeats, dim=0): each entry (or row) repeated `repeats`
// times in place, so lengths line up with the b * num_heads + h rows of transpose_qkv.
Tensor repeat_interleave(const Tensor& valid_lens, std::int64_t repeats);

// scores = Q K^T / sqrt(d); weights = masked_softmax(scores, valid_lens); out = dropout(weights) V
class DotProductAttention : public nn::Module {
public:
  explicit DotProductAttention(double dropout, std::uint64_t seed = 0);
  // queries (B', Tq, d), keys (B', Tk, d), values (B', Tk, dv), valid_lens undefined/(B')/(B', Tq)
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens = Tensor());
  Tensor attention_weights; // (B', Tq, Tk) from the last forward, detached (for inspection)
  std::shared_ptr<nn::Dropout> dropout; // registered, so train()/eval() reach it
};

// How MultiHeadAttention computes: `composed` runs d2l's code op by op (transpose_qkv ->
// DotProductAttention -> transpose_output), the textbook form that explain and the tests walk
// through; `fused` runs ops::attention (one op per layer, heads as strides; self-attention with
// one gemm for the three projections), which training uses. The two agree to float precision
// (tests/test_fused_attention.cpp). Attention dropout > 0 in training runs composed either way:
// the fused op has no dropout.
enum class AttentionPath { composed, fused };

class MultiHeadAttention : public nn::Module {
public:
  // d2l's signature. Parameters W_q (num_hiddens, query_size), W_k (num_hiddens, key_size),
  // W_v (num_hiddens, value_size), W_o (num_hiddens, num_hiddens), with biases iff `bias`.
  MultiHeadAttention(std::int64_t key_size, std::int64_t query_size, std::int64_t value_size,
                     std::int64_t num_hiddens, std::int64_t num_heads, double dropout, bool bias, Generator& gen,
                     DType dtype = DType::f32);
  // The plain PyTorch self-attention signature: biases; parameters named query, key, value, out.
  // Throws std::invalid_argument("embed_dim must be divisible by num_heads") otherwise.
  MultiHeadAttention(std::int64_t embed_dim, std::int64_t num_heads, Generator& gen, DType dtype = DType::f32);

  // queries (B, Tq, query_size), keys (B, Tk, key_size), values (B, Tk, value_size),
  // valid_lens undefined, (B) or (B, Tq)  ->  (B, Tq, num_hiddens)
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens = Tensor());
  // Self-attention: forward(x, x, x) -> (B, T, embed_dim)
  Tensor forward(const Tensor& x) { return forward(x, x, x); }
  // The last forward's attention weights as (B, num_heads, Tq, Tk). The fused path keeps them only
  // when keep_weights is set (they cost B * heads * Tq * Tk values; without them a long sequence
  // needs memory linear in T); otherwise this throws std::logic_error.
  Tensor attention_weights() const;

  std::int64_t num_heads, num_hiddens;
  AttentionPath path = AttentionPath::composed;
  bool keep_weights = false;
  std::shared_ptr<DotProductAttention> attention;
  std::shared_ptr<nn::Linear> W_q, W_k, W_v, W_o; // named query/key/value/out in the plain form

private:
  Tensor forward_fused(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens);
  Tensor fused_weights_; // (B, num_heads, Tq, Tk) from the last fused forward with keep_weights
};

} // namespace headgrad::models
