// attention.hpp - scaled dot-product attention and multi-head attention in two published forms,
// line by line: d2l's MultiHeadAttention with transpose_qkv / transpose_output (d2l.ai, "Multi-Head
// Attention": https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html)
// and the plain PyTorch self-attention module MultiHeadAttention(embed_dim, num_heads) with
// query/key/value/out linear layers, as PyTorch tutorials write it. Every tensor carries its
// shape in a comment.
#pragma once
#include <functional>
#include <memory>

#include "framework/nn/layers.hpp"
#include "framework/nn/module.hpp"
#include "framework/ops/nn_ops.hpp" // ops::AttentionMask

namespace headgrad::models {

// (batch, T, num_heads * d) -> (batch * num_heads, T, d): head h of batch row b becomes row
// b * num_heads + h. Throws if the last dim is not divisible by num_heads.
Tensor transpose_qkv(const Tensor& X, std::int64_t num_heads);
// The inverse: (batch * num_heads, T, d) -> (batch, T, num_heads * d).
Tensor transpose_output(const Tensor& X, std::int64_t num_heads);
// torch.repeat_interleave(valid_lens, repeats, dim=0): each entry (or row) repeated `repeats`
// times in place, so lengths line up with the b * num_heads + h rows of transpose_qkv.
Tensor repeat_interleave(const Tensor& valid_lens, std::int64_t repeats);

// d2l's DotProductAttention as a function of the dropout module it uses:
//   scores = Q K^T / sqrt(d); weights = masked_softmax(scores, mask); out = dropout(weights) V
// queries (B', Tq, d), keys (B', Tk, d), values (B', Tk, dv), mask over the B' rows (d2l's valid_lens
// (B') or (B', Tq), or any ops::AttentionMask) -> (B', Tq, dv). `weights` receives the weights
// (B', Tq, Tk) before dropout, detached.
Tensor dot_product_attention(const Tensor& queries, const Tensor& keys, const Tensor& values,
                             const ops::AttentionMask& mask, nn::Dropout& dropout, Tensor& weights);

// d2l's module: dot_product_attention with its own dropout, keeping the last weights.
class DotProductAttention : public nn::Module {
public:
  explicit DotProductAttention(double dropout, std::uint64_t seed = 0);
  // queries (B', Tq, d), keys (B', Tk, d), values (B', Tk, dv), valid_lens undefined/(B')/(B', Tq)
  Tensor forward(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& valid_lens = Tensor());
  Tensor attention_weights; // (B', Tq, Tk) from the last forward, detached (for inspection)
  std::shared_ptr<nn::Dropout> dropout; // registered, so train()/eval() reach it
};

// How a multi-head attention layer (MultiHeadAttention, and GPT's CausalSelfAttention) computes:
// `composed` runs d2l's code op by op (transpose_qkv -> DotProductAttention -> transpose_output),
// the textbook form that explain and the tests walk through; `fused` runs ops::attention (one op
// per layer, heads as strides; self-attention with one gemm for the three projections), which
// training uses. The two agree to float precision (tests/test_fused_attention.cpp), attention
// dropout included: both draw its mask from the layer's dropout generator, the same mask from
// the same state.
enum class AttentionPath { composed, fused };

// The attention weights of a layer's last forward, (B, heads, Tq, Tk): P before dropout, as d2l's
// attention_weights - what the pictures draw (train/pictures/attention_svg.cpp). The composed path always has
// them (P is one of its tensors); the fused op hands them out only when `keep` is set before the
// forward (they cost B * heads * Tq * Tk values, and the op then keeps P instead of taking the
// FlashAttention-2 tiling on a long sequence, whose memory is linear in T).
struct AttentionWeights {
  bool keep = false;
  Tensor last; // undefined when the last forward did not keep them
  // `last`; std::logic_error naming `who` when it is undefined.
  const Tensor& get(const char* who) const;
};

// One attention layer's queries, keys and values after the projections: q (B, Tq, C), k and v
// (B, Tk, C), or, for self-attention, the packed qkv (B, T, 3C) = [q | k | v] of one gemm (which
// the fused op reads in place); C = heads * head_dim.
struct Projected {
  Tensor q, k, v;
  Tensor qkv;
};

// Multi-head attention between the projections and the output projection, on `path`: the one
// function both MultiHeadAttention and GPT's CausalSelfAttention call.
//   composed: transpose_qkv; the mask repeated per head (ops::repeat_per_head, as d2l repeats
//             valid_lens); dot_product_attention with `dropout`; transpose_output.
//   fused:    ops::attention (ops::self_attention for a packed qkv), the dropout drawn by the op
//             from `dropout`'s generator (p when the module is training, none in eval mode).
// mask: ops::AttentionMask for the B batch rows. Fills `weights` as AttentionWeights says.
// Returns (B, Tq, C), the heads side by side.
Tensor multi_head_attention(const Projected& x, std::int64_t heads, const ops::AttentionMask& mask,
                            AttentionPath path, nn::Dropout& dropout, AttentionWeights& weights);

class MultiHeadAttention : public nn::Module {
public:
  // d2l's signature as its 0.17 edition writes it (d2l 1.0 writes (num_hiddens, num_heads, dropout,
  // bias) with LazyLinear layers, sized at the first call). Parameters W_q (num_hiddens, query_size),
  // W_k (num_hiddens, key_size), W_v (num_hiddens, value_size), W_o (num_hiddens, num_hiddens), with
  // biases iff `bias`.
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
  // The last forward's attention weights as (B, num_heads, Tq, Tk) (see AttentionWeights: on the
  // fused path only with weights.keep set); std::logic_error when it has none.
  Tensor attention_weights() const;

  std::int64_t num_heads, num_hiddens;
  AttentionPath path = AttentionPath::composed;
  // The layer computed by a function of yours instead, whatever the path: when set, forward()
  // returns own(*this, queries, keys, values, valid_lens). The attention exercise sets it to a
  // custom autograd op whose backward is the learner's, to train the model with it
  // (docs/exercises/attention_train.hpp).
  std::function<Tensor(MultiHeadAttention&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)> own;
  AttentionWeights weights;
  std::shared_ptr<DotProductAttention> attention; // d2l's submodule: its dropout is the layer's (its own
                                                  // attention_weights stay unset: see `weights`)
  std::shared_ptr<nn::Linear> W_q, W_k, W_v, W_o; // named query/key/value/out in the plain form
};

} // namespace headgrad::models
