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

#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::kernels {

// Where the heads live. Each of Q, K, V, O (and their gradients, which share the layout) is a
// (B, T, ...) buffer: element (b, t, h*dh + c) at b*batch_stride + t*row_stride + h*dh + c.
struct HeadsLayout {
  std::int64_t B = 0, H = 0, Tq = 0, Tk = 0, dh = 0;
  std::int64_t q_row = 0, k_row = 0, v_row = 0, o_row = 0;       // row strides
  std::int64_t q_batch = 0, k_batch = 0, v_batch = 0, o_batch = 0; // batch strides
};

// Which keys each query row keeps: keys j < lens[b*Tq + i] (lens null: all) and keep[(b*Tq + i)*Tk
// + j] != 0 (keep null: all), or keep[((b*H + h)*Tq + i)*Tk + j] != 0 for head h when
// keep_per_head. Lengths are the same for every head. A row that keeps nothing outputs zeros and
// passes no gradient; a row whose kept scores hold a NaN or +inf outputs NaN (its weights are NaN on
// every key, as PyTorch's softmax after masked_fill(-inf)).
struct KeptKeys {
  const std::int64_t* lens = nullptr;
  const std::uint8_t* keep = nullptr;
  bool keep_per_head = false;
};

// Dropout on the weights before they multiply V (d2l's DotProductAttention: dropout(P) V):
// A = P ⊙ F with F = keep ? scale : 0 per weight, keep (B, H, Tq, Tk) the flags (1 keeps) and
// scale = 1 / (1 - p); keep null: no dropout (A = P). P itself, the weights, stays undropped.
// F is formed and multiplied in T as ops::dropout_with_mask does (mask * scale, then x * that), so
// A, and a NaN weight times a dropped 0, are its values exactly.
struct WeightsDropout {
  const std::uint8_t* keep = nullptr;
  double scale = 1;
};

HEADGRAD_ISA_BEGIN

// O = dropout(softmax(scale Q K^T, masked)) V per head; P (B, H, Tq, Tk): the weights before
// dropout, kept for the backward (null: not kept, a per-thread scratch is used).
template <typename T>
void attention_forward(T* o, T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, const KeptKeys& kept,
                       T scale, const WeightsDropout& drop = {});

// The gradients of attention_forward given dO (o's layout), its P and its dropout flags. Each of
// dq, dk, dv may be null (not needed); first_write as in GradBuffer (autograd.hpp): assign instead of
// add. `kept` (the forward's) gives masked keys dS = 0 even in a row whose P or dP holds a NaN;
// without it such a row's masked keys may get NaN (P = 0 there, so in every other row the result is
// the same).
template <typename T>
void attention_backward(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout, const T* p,
                        const T* q, const T* k, const T* v, const HeadsLayout& L, T scale, const KeptKeys& kept = {},
                        const WeightsDropout& drop = {});

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

// From this many scores per head (Tq x Tk) on, the flash kernels replace keeping P: measured by
// `headgrad_bench --attention-sweep` (causal, forward + backward, float32, 1 and 2 threads): with
// head size 64 flash is 0.85-0.90x keep-P's time from T = 256 on and 1.0-1.2x below; with head
// size 16 it is 1.05-1.15x at T = 256 and 0.8-0.95x from T = 384-512 on (the recomputed scores
// cost relatively more when each score is a shorter dot product).
inline constexpr std::int64_t kFlashMinScores = 256 * 256, kFlashMinScoresSmallHeads = 384 * 384;
inline bool flash_attention_pays(std::int64_t Tq, std::int64_t Tk, std::int64_t dh) {
  return Tq * Tk >= (dh >= 32 ? kFlashMinScores : kFlashMinScoresSmallHeads);
}

HEADGRAD_ISA_END

// Outside the copies built per instruction set (framework/engine/kernels/isa/), the float and double
// instances are the active copy's (kernels/kernel_dispatch.cpp, runtime::active_isa()).
#ifndef HEADGRAD_ISA_NS
#define HEADGRAD_ATTENTION_INSTANCES(T) \
  template <> void attention_forward<T>(T* o, T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, \
      const KeptKeys& kept, T scale, const WeightsDropout& drop); \
  template <> void attention_backward<T>(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, \
      const T* dout, const T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, T scale, \
      const KeptKeys& kept, const WeightsDropout& drop); \
  template <> void flash_attention_forward<T>(T* o, T* lse, const T* q, const T* k, const T* v, \
      const HeadsLayout& L, const KeptKeys& kept, T scale); \
  template <> void flash_attention_backward<T>(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, \
      const T* dout, const T* o, const T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L, \
      const KeptKeys& kept, T scale);
HEADGRAD_ATTENTION_INSTANCES(float)
HEADGRAD_ATTENTION_INSTANCES(double)
#undef HEADGRAD_ATTENTION_INSTANCES
#endif
} // namespace headgrad::kernels
