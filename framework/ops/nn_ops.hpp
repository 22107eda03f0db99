// nn_ops.hpp - the fused ops that attention and training are built from. Each is one forward
// kernel and one backward kernel (see framework/ops/DERIVATIVES.md for the formulas).
#pragma once
#include <cstdint>

#include "framework/tensor.hpp"

namespace headgrad {
class Generator;
}

namespace headgrad::ops {

// ---- masked softmax (masked_softmax.cpp) ------------------------------------------------------
// Softmax over the last axis of x (B, Tq, Tk), d2l's masked_softmax:
//   valid_lens undefined : no mask
//   valid_lens (B)       : keys j >= valid_lens[b] get weight 0, for every query of batch row b
//   valid_lens (B, Tq)   : keys j >= valid_lens[b, q] get weight 0 (one length per query)
// A length of 0 gives an all-zero row with zero gradient (d2l's -1e6 fill would instead give a
// uniform row; for lengths >= 1 both agree to float precision). Lengths must be int64 in
// [0, Tk]; anything else throws std::invalid_argument.
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens = Tensor());
// Causal: query i sees keys j <= i (x is (..., Tq, Tk); row i keeps min(i + 1, Tk) keys).
Tensor causal_softmax(const Tensor& x);
// Boolean key mask, keep: bool8 (B, Tk) or (B, Tq, Tk); TRUE MEANS KEEP (attend), false masks.
Tensor masked_softmax_keep(const Tensor& x, const Tensor& keep);

// ---- fused multi-head attention (attention.cpp) ----------------------------------------------
// The keys each query may attend to. Any combination; a query that keeps no key outputs zeros and
// passes no gradient (as masked_softmax with a zero length).
struct AttentionMask {
  Tensor valid_lens;   // undefined, or int64 (B) or (B, Tq): key j kept when j < valid_lens (d2l)
  bool causal = false; // key j kept only when j <= query i
  Tensor keep;         // undefined, or bool (B, Tk) or (B, Tq, Tk): true keeps
};
// d2l's multi-head attention after the projections, as one op: q (B, Tq, C), k and v (B, Tk, C)
// with C = heads * head_dim, each head the C / heads columns of its index; returns (B, Tq, C),
// the heads side by side (what transpose_output gives). Equal to transpose_qkv ->
// DotProductAttention -> transpose_output (dropout 0). scale 0 means 1 / sqrt(head_dim).
// `weights`, if given, receives the attention weights (B, heads, Tq, Tk).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads,
                 const AttentionMask& mask = {}, Tensor* weights = nullptr, double scale = 0);
// Self-attention from one packed projection qkv (B, T, 3C) = [q | k | v] (one gemm for the three
// projections); its gradient is written into d(qkv) directly.
Tensor self_attention(const Tensor& qkv, std::int64_t heads, const AttentionMask& mask = {},
                      Tensor* weights = nullptr, double scale = 0);

// ---- linear (linear.cpp) ----------------------------------------------------------------------
// y = x W^T + b for x (..., in), weight (out, in), bias (out) or undefined. One gemm each way,
// transposition by BLAS flags.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// relu(linear(x, weight, bias)) as one op (a position-wise FFN's first layer): one pass less each way.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- layer norm (layer_norm.cpp) --------------------------------------------------------------
// y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance, as PyTorch).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// layer_norm(x + y, ...) as one op (d2l's AddNorm: a residual connection and its norm).
Tensor add_layer_norm(const Tensor& x, const Tensor& y, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// ---- dropout (dropout.cpp) --------------------------------------------------------------------
// Inverted dropout: each element is zeroed with probability p and the rest scaled by 1/(1-p).
// Identity when !training or p == 0. p must be in [0, 1).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// Dropout with a given keep mask (0/1 values, x's shape) - the deterministic core, gradchecked.
Tensor dropout_with_mask(const Tensor& x, const Tensor& mask, double p);

// ---- cross-entropy (cross_entropy.cpp) --------------------------------------------------------
// Fused log-softmax + negative log-likelihood over logits (..., V) with int64 targets (...).
// Positions where `mask` is 0 carry no loss; the mean is over the counted positions only (not
// the padded length). mask: undefined (all count), or (...) of any dtype (nonzero = counts).
// Returns a scalar. Targets must be in [0, V) at counted positions.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& mask = Tensor());
// mask (B, T) from valid_lens (B): position t counts when t < valid_lens[b].
Tensor sequence_mask(const Tensor& valid_lens, std::int64_t max_len);

} // namespace headgrad::ops
