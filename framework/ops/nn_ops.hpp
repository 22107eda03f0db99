// nn_ops.hpp - the fused ops that attention and training are built from. Each is one forward
// kernel and one backward kernel (see framework/ops/DERIVATIVES.md for the formulas).
#pragma once
#include <cstdint>
#include <optional>

#include "framework/ops/ops.hpp" // GeluApproximate
#include "framework/core/tensor.hpp"

namespace headgrad {
class Generator;
}

namespace headgrad::ops {

// ---- masked softmax (masked_softmax.cpp) ------------------------------------------------------
// Softmax over the last axis of x (B, Tq, Tk) or (B, H, Tq, Tk) (the scores of H heads, as
// multi-head attention makes them; each head gets its batch row's mask), d2l's masked_softmax:
//   valid_lens undefined : no mask
//   valid_lens (B)       : keys j >= valid_lens[b] get weight 0, for every query of batch row b
//   valid_lens (B, Tq)   : keys j >= valid_lens[b, q] get weight 0 (one length per query)
// Masked keys are excluded, not filled with d2l's -1e6, and that differs from d2l in two places:
// - a length of 0 gives an all-zero row with zero gradient (d2l: a uniform row);
// - for lengths >= 1 both agree to float precision only while each row's largest kept logit is
//   well above -1e6 (by more than about 20 in float32 and 40 in float64, plus ln Tk): there
//   d2l's masked entries get weight exp(-1e6 - max), which rounds to 0 next to the kept ones.
//   When every kept logit lies below about -1e6, d2l's fill wins and it spreads the weight over
//   the masked keys instead; here the kept keys still share it.
// (PyTorch's own masked attention, with -inf, gives NaN for a row with nothing kept.) Lengths
// must be int64 and >= 0 (a negative one throws std::invalid_argument: d2l would mask every key);
// a length above Tk keeps every key, as d2l's sequence_mask does.
// NaN: a NaN or +inf among a row's kept logits makes the whole row NaN (masked keys too), as in
// d2l and PyTorch; masked keys still get zero gradient (d2l's fill cuts their gradient path).
Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens = Tensor());
// Causal: query i sees keys j <= i (x is (..., Tq, Tk); row i keeps min(i + 1, Tk) keys).
Tensor causal_softmax(const Tensor& x);
// Boolean key mask for x (B, Tq, Tk) or (B, H, Tq, Tk), keep: bool8 (B, Tk) or (B, Tq, Tk), the
// same for every head, or x's own shape (B, H, Tq, Tk); TRUE MEANS KEEP (attend), false masks.
// A row with nothing kept is all zeros with zero gradient (PyTorch, masking with -inf: NaN). NaN
// and masked gradients as masked_softmax (PyTorch's masked_fill(-inf) + softmax).
Tensor masked_softmax_keep(const Tensor& x, const Tensor& keep);

// ---- the keys a query attends to (attention_mask.cpp) -----------------------------------------
// Any combination; a key is kept when every part given keeps it. A query that keeps no key gets
// all-zero weights and passes no gradient (as masked_softmax with a zero length). A NaN or +inf
// among a query's kept scores makes its weights NaN, as the composed ops (and PyTorch's) give.
// The scores are (B, Tq, Tk), or (B, H, Tq, Tk) with H heads (attention's); valid_lens and keep
// are per batch row, the same for every head, unless keep is per head.
struct AttentionMask {
  Tensor valid_lens;   // undefined, or int64 (B) or (B, Tq), >= 0: key j kept when j < valid_lens (d2l;
                       // a length above Tk keeps every key)
  bool causal = false; // key j kept only when j <= query i
  Tensor keep;         // undefined, or bool (B, Tk), (B, Tq, Tk) or, with heads, (B, H, Tq, Tk): true keeps
};
// masked_softmax with any AttentionMask: what attention computes its weights with, for the
// composed path (x (B, Tq, Tk) or (B, H, Tq, Tk)). An empty mask is softmax(x). Errors, NaN and
// gradients as masked_softmax.
Tensor masked_softmax(const Tensor& x, const AttentionMask& mask);
// The mask of scores (B, heads, Tq, Tk) for their (B * heads, Tq, Tk) rows, as transpose_qkv
// lays the heads out (row b * heads + h is head h of batch row b): d2l repeats valid_lens so
// (torch.repeat_interleave(valid_lens, heads, dim=0)); here every part of the mask is repeated,
// causal folded into the lengths, a per-head keep read as (B * heads, Tq, Tk). Refuses what
// attention refuses, with the same messages, naming op.
AttentionMask repeat_per_head(const AttentionMask& mask, std::int64_t B, std::int64_t heads, std::int64_t Tq,
                              std::int64_t Tk, const char* op = "repeat_per_head");

// ---- fused multi-head attention (attention.cpp) ----------------------------------------------
// Attention dropout, d2l's DotProductAttention's dropout(weights) before the weights multiply V:
// each weight zeroed with probability p, the rest scaled by 1 / (1 - p). The keep flags are drawn
// from *gen, one per weight in (B, heads, Tq, Tk) order - the draws ops::dropout (and nn::Dropout)
// makes over the composed path's weights - so the fused op and the composed ops give the same
// result from the same generator state. p = 0 is none (pass 0 outside training, where nn::Dropout
// is the identity); p must be in [0, 1), and gen given when p > 0.
struct AttentionDropout {
  double p = 0;
  Generator* gen = nullptr;
};
// d2l's multi-head attention after the projections, as one op: q (B, Tq, C), k and v (B, Tk, C)
// with C = heads * head_dim, each head the C / heads columns of its index; returns (B, Tq, C),
// the heads side by side (what transpose_output gives). Equal to transpose_qkv ->
// DotProductAttention -> transpose_output. scale 0 means 1 / sqrt(head_dim); any other finite
// scale, negative ones included, multiplies the scores as given (NaN or infinite: refused with
// std::invalid_argument). `mask`: see AttentionMask (keep per head: (B, heads, Tq, Tk)).
// `weights`, if given, receives the attention weights (B, heads, Tq, Tk), before dropout.
// Long sequences take the FlashAttention-2 tiling unless weights are asked for or dropout is on.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads,
                 const AttentionMask& mask = {}, Tensor* weights = nullptr, double scale = 0,
                 const AttentionDropout& dropout = {});
// Self-attention from one packed projection qkv (B, T, 3C) = [q | k | v] (one gemm for the three
// projections); its gradient is written into d(qkv) directly.
Tensor self_attention(const Tensor& qkv, std::int64_t heads, const AttentionMask& mask = {},
                      Tensor* weights = nullptr, double scale = 0, const AttentionDropout& dropout = {});

// ---- linear (linear.cpp) ----------------------------------------------------------------------
// y = x W^T + b for x (..., in), weight (out, in), bias (out) or undefined. One gemm each way,
// transposition by BLAS flags.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// relu(linear(x, weight, bias)) as one op (a position-wise FFN's first layer): one pass less each way.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// gelu(linear(x, weight, bias), approximate) as one op (GPT's MLP): the bias, GELU and GELU's
// derivative in one pass over the gemm's output; the backward multiplies by that derivative and
// runs linear's gemms.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                   GeluApproximate approximate = GeluApproximate::none);
// residual + linear(x, weight, bias) as one op (a residual connection around an output
// projection, as in a GPT block); residual has the output's shape and dtype. The gemm adds
// x W^T onto a copy of the residual (beta 1), so the add costs no pass of its own.
Tensor linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual);

// ---- layer norm (layer_norm.cpp) --------------------------------------------------------------
// y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance, as PyTorch).
// weight and bias may each be undefined (no affine parameters: 1 and 0, as PyTorch's None). An
// empty last axis (D = 0) gives an empty result, as PyTorch. A row of finite values whose squared
// deviations overflow (float32 from |x| ~ 1e19, float64 from 1e154) is normalised exactly, by a
// rescaled variance, where PyTorch returns NaN; a row holding an infinity or NaN gives NaN.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// layer_norm(x + y, ...) as one op (d2l's AddNorm: a residual connection and its norm); weight and
// bias optional, as for layer_norm.
Tensor add_layer_norm(const Tensor& x, const Tensor& y, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// ---- dropout (dropout.cpp) --------------------------------------------------------------------
// Inverted dropout: each element is zeroed with probability p and the rest scaled by 1/(1-p).
// Identity when !training or p == 0. p must be in [0, 1).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// Dropout with a given keep mask (0/1 values, x's shape) - the deterministic core, gradchecked.
Tensor dropout_with_mask(const Tensor& x, const Tensor& mask, double p);

// ---- cross-entropy (cross_entropy.cpp) --------------------------------------------------------
// Fused log-softmax + negative log-likelihood over logits (..., V) with int64 targets (...): the
// class axis is the LAST one (PyTorch's F.cross_entropy takes (N, C, ...), classes on axis 1).
// Each position r has a weight w_r and loss l_r = w_r (logsumexp(x_r) - x_r[t_r]):
//   mask undefined        w_r = 1 everywhere;
//   mask bool or int64    w_r = 1 where the mask is nonzero, 0 elsewhere (a count of positions);
//   mask float            w_r = the mask value itself, a per-position weight (finite, >= 0; else
//                         std::invalid_argument) - as PyTorch's class weights, the mean divides by
//                         the sum of the weights: (loss * w).sum() / w.sum() in PyTorch terms.
// A position whose target is ignore_index has w_r = 0 (PyTorch's ignore_index). Targets must lie
// in [0, V) wherever w_r != 0.
enum class Reduction { mean, sum, none };
struct CrossEntropyOptions {
  Tensor mask;                                     // see above; undefined: every position counts
  std::optional<std::int64_t> ignore_index = -100; // PyTorch's default; nullopt: none
  Reduction reduction = Reduction::mean;
};
// reduction mean: sum_r l_r / sum_r w_r, a scalar; difference: 0 (and a zero gradient) when
//                 nothing is counted (PyTorch: NaN) - a batch that is all padding adds nothing.
// reduction sum:  sum_r l_r, a scalar.   reduction none: l, of shape (...), 0 where w_r = 0.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options);
// The masked mean, no ignore_index (every target at a counted position must be a class).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& mask = Tensor());
// mask (B, T) from valid_lens (B): position t counts when t < valid_lens[b].
Tensor sequence_mask(const Tensor& valid_lens, std::int64_t max_len);

// ---- losses (losses.cpp) ----------------------------------------------------------------------
// torch.nn.functional's, with its reductions (mean over every element, sum, none). The
// elementwise ones take an input and a target of one float dtype and one shape (PyTorch
// broadcasts a target of another shape, with a warning: refused here); a mean over an empty
// input throws (PyTorch: NaN).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
// 0.5 d² / beta where |d| < beta, else |d| - 0.5 beta (d = input - target; beta = 0: l1_loss)
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                      double beta = 1.0);
// -[y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))] for logits x and targets y in [0, 1] (no
// weight or pos_weight)
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::mean);
// -log_probs[..., t] for log-probabilities (..., C), classes on the LAST axis as cross_entropy's
// (PyTorch: axis 1), and int64 targets (...); a target equal to ignore_index adds 0 and is not
// counted by the mean (nothing counted: NaN, as PyTorch).
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, Reduction reduction = Reduction::mean,
                std::int64_t ignore_index = -100);

} // namespace headgrad::ops
