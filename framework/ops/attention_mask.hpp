// attention_mask.hpp - the one place where an attention mask (ops::AttentionMask in nn_ops.hpp:
// valid_lens, causal, a boolean keep mask) becomes what the kernels take: a kept-prefix length per
// query and keep flags per score. masked_softmax, causal_softmax, masked_softmax_keep
// (masked_softmax.cpp), attention and self_attention (attention.cpp) and repeat_per_head all build
// their masks here, so they accept the same masks and refuse the others with the same messages.
// Private: only .cpp files include it (it includes the seam, framework/engine/kernels.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/engine/kernels.hpp"
#include "framework/ops/nn_ops.hpp"

namespace headgrad::ops {

// The scores a mask is for, as (batch, heads, queries, keys). `heads_axis`: the scores have one
// (4-D scores, or the fused attention, which is given its heads), so a keep mask may be per head;
// 3-D scores (batch, queries, keys) are one head without one. `what` names them in messages
// ("scores of shape [2, 3, 4]").
struct ScoreDims {
  std::int64_t B = 0, H = 1, Tq = 0, Tk = 0;
  bool heads_axis = false;
  std::string what;
};
// The dims of scores x (B, Tq, Tk) or (B, H, Tq, Tk); any other rank: std::invalid_argument naming op.
ScoreDims score_dims(const Tensor& x, const char* op);
// The dims of scores x (..., Tq, Tk) of any rank >= 2 as (B = the leading axes' product, 1, Tq,
// Tk): all the causal mask needs. Rank < 2: std::invalid_argument naming op.
ScoreDims any_rank_score_dims(const Tensor& x, const char* op);

// Which keys each query keeps. Key j of query q in batch row b is kept when
//   j < lens[b * Tq + q]     lens empty: no limit. valid_lens and causal combined: the smaller of
//                            valid_lens and q + 1 (a length above Tk keeps every key);
//   keep[...] != 0           keep empty: no flags. At (b * Tq + q) * Tk + j, the same for every
//                            head, or at ((b * H + h) * Tq + q) * Tk + j for head h when per_head.
// Lengths are the same for every head.
struct KeptKeys {
  ScoreDims dims;
  std::vector<std::int64_t> lens;
  std::vector<std::uint8_t> keep;
  bool per_head = false;

  // As kernels/attention_heads.hpp takes it (heads as strides; pointers into this object).
  kernels::KeptKeys heads_view() const;
};

// The same mask with one length and one row of flags per score row r = (b * H + h) * Tq + q, as
// the row softmax kernels (kernels::softmax_forward, softmax_backward) take them. Empty vectors: no
// limit, no flags.
struct KeptRows {
  std::vector<std::int64_t> lens; // B * H * Tq, or empty
  std::vector<std::uint8_t> keep; // B * H * Tq * Tk, or empty
};
// Moves k's vectors where they already are per row (H = 1, or a per-head keep), copies them out
// for every head otherwise.
KeptRows per_row(KeptKeys k);

// The mask for scores d: checks valid_lens (int64, (B) or (B, Tq), no negative length) and keep
// (bool, (B, Tk), (B, Tq, Tk), or (B, H, Tq, Tk) when d.heads_axis); otherwise
// std::invalid_argument naming op, the mask's shape and the scores (d.what).
KeptKeys kept_keys(const AttentionMask& mask, const ScoreDims& d, const char* op);

// Softmax over the last axis keeping only `mask`'s keys per row (an empty mask keeps all: plain
// softmax), recorded as `name` with its backward (masked_softmax.cpp): the one op behind softmax,
// masked_softmax, masked_softmax_keep and causal_softmax.
Tensor softmax_rows(const Tensor& x, KeptRows mask, const char* name);

} // namespace headgrad::ops
