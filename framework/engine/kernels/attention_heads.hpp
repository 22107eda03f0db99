// attention_heads.hpp - multi-head scaled dot-product attention over all (batch, head) pairs, in
// the heads' natural layout: head h of a (B, T, H*dh) buffer is the T x dh matrix starting at
// column h*dh, read with the buffer's row stride. The head split of d2l's transpose_qkv is then a
// stride, not a copy, and the output is written straight into its (B, Tq, H*dh) place.
//
// Two algorithms, the same function:
//   - attention_forward / attention_backward keep the weights P (B, H, Tq, Tk) between the
//     passes: for short sequences the fastest, and P is there to look at. Only these take
//     dropout on the weights (its flags are one per weight: the flash tiling would have to keep
//     them, or redraw them in the backward).
//   - flash_attention_forward / flash_attention_backward keep only the output and each row's
//     log-sum-exp (O(B H Tq) memory): tiles over the keys with an online softmax, scores
//     recomputed in the backward (FlashAttention-2, Dao 2023, https://arxiv.org/abs/2307.08691).
// Both run the (batch, head) pairs in parallel over the OpenMP threads, each pair's gemms on one
// thread, and write disjoint slices of every output.
#pragma once
#include <cstdint>

#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {

using kernels::HeadsLayout;    // (the seam's plain data: kernels.hpp says what each holds)
using kernels::KeptKeys;
using kernels::WeightsDropout;

HEADGRAD_ISA_BEGIN

// O = dropout(softmax(scale Q K^T, masked)) V per head; P (B, H, Tq, Tk): the weights before
// dropout, kept for the backward (null: not kept, a per-thread scratch is used).
template <typename T>
void attention_forward(T* o, T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, const KeptKeys& kept,
                       T scale, const WeightsDropout& drop);

// The gradients of attention_forward given dO (o's layout), its P and its dropout flags. Each of
// dq, dk, dv may be null (not needed); first_write as in GradBuffer (autograd.hpp): assign instead of
// add. `kept` (the forward's) gives masked keys dS = 0 even in a row whose P or dP holds a NaN;
// without it such a row's masked keys may get NaN (P = 0 there, so in every other row the result is
// the same).
template <typename T>
void attention_backward(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout, const T* p,
                        const T* q, const T* k, const T* v, const HeadsLayout& L, T scale, const KeptKeys& kept,
                        const WeightsDropout& drop);

// The same forward, keeping only lse (B, H, Tq): each row's log-sum-exp of its kept scaled
// scores (+inf for a row that keeps nothing).
template <typename T>
void flash_attention_forward(T* o, T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L,
                             const KeptKeys& kept, T scale);

// Its backward: recomputes the scores tile by tile from q, k, lse; needs the forward's output o.
template <typename T>
void flash_attention_backward(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout,
                              const T* o, const T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L,
                              const KeptKeys& kept, T scale);

// Query and key tile sizes of the flash kernels (a 64 x 64 score tile is 16 KiB of floats).
inline constexpr std::int64_t kFlashQueryTile = 64, kFlashKeyTile = 64;

HEADGRAD_ISA_END

} // namespace headgrad::engine
