// attention_heads.cpp - see attention_heads.hpp. Read head_forward and head_backward first: one
// (batch, head) pair on one screen, each backward line reversing the forward line with its number.
// Built once per instruction set (framework/engine/kernels/isa/, as the row kernels it calls); the ops
// call the active copy through the kernel table (kernels.hpp, kernels/kernel_table.cpp).
#include "framework/engine/kernels/attention_heads.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "framework/engine/kernels/attention_rows.hpp"
#include "framework/engine/kernels/first_write.hpp"
#include "framework/engine/kernels/gemm_batched.hpp"
#include "framework/engine/kernels/row_softmax.hpp"
#include "framework/engine/kernels/scratch.hpp"
#include "framework/engine/kernels/small_gemm.hpp"
#include "framework/engine/kernels/vec_math.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN
namespace {

// One gemm on the calling thread: the loop kernel for tiny matrices (attention at T = 16, dh = 16),
// BLAS otherwise. (The callers already run one (batch, head) pair per thread.)
template <typename T>
void gemm1(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
           const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m <= kSmallGemmMax && n <= kSmallGemmMax && k <= kSmallGemmMax)
    small_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// One (batch, head) pair: its matrices (row strides from the layout) and the keys its rows keep.
template <typename T> struct Head {
  std::int64_t Tq, Tk, dh;
  const T *Q, *K, *V; // Tq x dh, Tk x dh, Tk x dh
  std::int64_t ldq, ldk, ldv, ldo;
  const std::int64_t* lens;  // this batch row's Tq lengths, or null
  const std::uint8_t* keep;  // this pair's Tq x Tk keep flags (its batch row's, or its own), or null
  const std::uint8_t* drop;  // this pair's Tq x Tk dropout keep flags, or null: no dropout
  T drop_scale;              // 1 / (1 - p)
  std::int64_t len(std::int64_t i) const { return lens ? std::min(lens[i], Tk) : Tk; }
  const std::uint8_t* keep_row(std::int64_t i) const { return keep ? keep + i * Tk : nullptr; }
};

template <typename T> Head<T> head_at(const T* q, const T* k, const T* v, const HeadsLayout& L, const KeptKeys& kept,
                                      std::int64_t b, std::int64_t h, const WeightsDropout& drop = {}) {
  const std::int64_t pair = b * L.H + h, TqTk = L.Tq * L.Tk;
  return {L.Tq, L.Tk, L.dh,
          q + b * L.q_batch + h * L.dh, k + b * L.k_batch + h * L.dh, v + b * L.v_batch + h * L.dh,
          L.q_row, L.k_row, L.v_row, L.o_row,
          kept.lens ? kept.lens + b * L.Tq : nullptr,
          kept.keep ? kept.keep + (kept.keep_per_head ? pair : b) * TqTk : nullptr,
          drop.keep ? drop.keep + pair * TqTk : nullptr, static_cast<T>(drop.scale)};
}

// a[i] = p[i] * (keep[i] ? scale : 0) for n weights: dropout's x * (mask * scale), as
// ops::dropout_with_mask multiplies (so a NaN weight that is dropped stays NaN, as there). a may be p.
template <typename T> void drop_weights(T* a, const T* p, const std::uint8_t* keep, T scale, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) a[i] = p[i] * (keep[i] ? scale : T(0));
}

// x = 0 where |x| is below the smallest normal number, for an m x n block with row stride ld.
// Attention that has learnt to look at few keys has weights P near 0 for the rest, and products
// with them (the gradients of those keys' values) end up subnormal; every gemm that then reads
// them runs on the CPU's slow subnormal path (the next layer's input-gradient gemm ran 3x slower
// on the default model). Such a value is below 1.2e-38 (float) and counts for nothing beside the
// others of its row; PyTorch keeps it (and pays the same slowdown).
template <typename T> void flush_subnormal(T* x, std::int64_t m, std::int64_t n, std::int64_t ld) {
  constexpr T tiny = std::numeric_limits<T>::min();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const T v = x[i * ld + j];
      x[i * ld + j] = (v < tiny && v > -tiny) ? T(0) : v;
    }
}

// The pair as the row kernels (attention_rows.hpp) take it, and whether they do: short sequences,
// no keep flags, no dropout.
template <typename T> RowsHead<T> rows_head(const Head<T>& h) {
  return {h.Tq, h.Tk, h.dh, h.Q, h.K, h.V, h.ldq, h.ldk, h.ldv, h.lens};
}
template <typename T> bool rows_kernels_take(const Head<T>& h) {
  return !h.keep && !h.drop && attention_rows_fit<T>(h.Tk, h.dh);
}

// ---- one head, keeping P ------------------------------------------------------------------------
// forward, for one (batch, head) pair: O (Tq x dh) and P (Tq x Tk, contiguous); A: Tq x Tk scratch
// for the dropped-out weights (used only with dropout).
template <typename T> void head_forward(T* O, T* P, T* A, const Head<T>& h, T scale) {
  const std::int64_t Tq = h.Tq, Tk = h.Tk, dh = h.dh;
  if (rows_kernels_take(h) && attention_rows_forward(O, h.ldo, P, rows_head(h), scale)) return; // the same, faster
  gemm1(false, true, Tq, Tk, dh, scale, h.Q, h.ldq, h.K, h.ldk, T(0), P, Tk);   // (1) S = scale Q K^T
  for (std::int64_t i = 0; i < Tq; ++i)                                         // (2) P = softmax(S) over kept keys
    softmax_row_any(P + i * Tk, P + i * Tk, h.len(i), h.keep_row(i), Tk);        //     (masked: 0; none kept: row 0)
  const T* W = P;
  if (h.drop) {                                                                  // (2b) A = dropout(P) = P F
    drop_weights(A, P, h.drop, h.drop_scale, Tq * Tk);
    W = A;
  }
  gemm1(false, false, Tq, dh, Tk, T(1), W, Tk, h.V, h.ldv, T(0), O, h.ldo);      // (3) O = A V (A = P without dropout)
}

// backward, for one pair: dO in, dQ / dK / dV out (each may be null); dP: Tq x Tk scratch.
// Q, K, V, O here are the pair's matrices (Qh, Kh, Vh, O of docs/backprop-through-attention.md's
// glossary: d = dh columns of the (B, T, H*dh) tensors, read in place), s the scale. The gemms, in
// order, as gemm1(transA, transB, m, n, k) computing C (m x n) = op(A) (m x k) op(B) (k x n):
//   (3) dV (Tk x dh) = Pᵀ (Tk x Tq) dO (Tq x dh)        gemm1(true, false, Tk, dh, Tq): P read transposed
//   (3) dP (Tq x Tk) = dO (Tq x dh) Vᵀ (dh x Tk)        gemm1(false, true, Tq, Tk, dh): V read transposed
//   (2) dS (Tq x Tk) = P ⊙ (dP - rowsum(dP ⊙ P))        softmax_row_backward, row by row, over dP in place
// With dropout (2b) A = P ⊙ F stands between them: (3) reads A, dV = Aᵀ dO (A recomputed into the
// dP scratch first) and dA = dO Vᵀ; then (2b) dP = dA ⊙ F, in place, before (2).
//   (1) dQ (Tq x dh) = s dS (Tq x Tk) K (Tk x dh)       gemm1(false, false, Tq, dh, Tk), alpha = s
//   (1) dK (Tk x dh) = s dSᵀ (Tk x Tq) Q (Tq x dh)      gemm1(true, false, Tk, dh, Tq), alpha = s: dS transposed
// dV, dQ and dK add (beta 1) unless their first write assigns (beta 0).
template <typename T>
void head_backward(T* dQ, bool q_first, T* dK, bool k_first, T* dV, bool v_first, T* dP, const T* dO, const T* P,
                   const Head<T>& h, T scale) {
  const std::int64_t Tq = h.Tq, Tk = h.Tk, dh = h.dh;
  if (rows_kernels_take(h) &&
      attention_rows_backward(dQ, q_first, dK, k_first, dV, v_first, dO, h.ldo, P, rows_head(h), scale))
    return; // the same, faster (subnormal gradients flushed there too)
  if (dV) {
    const T* A = P;
    if (h.drop) { // (2b) A = P F, the forward's dropped-out weights again
      drop_weights(dP, P, h.drop, h.drop_scale, Tq * Tk);
      A = dP;
    }
    gemm1(true, false, Tk, dh, Tq, T(1), A, Tk, dO, h.ldo, first_write_beta<T>(v_first), dV, h.ldv);     // (3) dV = A^T dO
    flush_subnormal(dV, Tk, dh, h.ldv);
  }
  if (!dQ && !dK) return;
  gemm1(false, true, Tq, Tk, dh, T(1), dO, h.ldo, h.V, h.ldv, T(0), dP, Tk);      // (3) dA = dO V^T
  if (h.drop) drop_weights(dP, dP, h.drop, h.drop_scale, Tq * Tk);               // (2b) dP = dA F (in place)
  for (std::int64_t i = 0; i < Tq; ++i)                                          // (2) dS = P (dP - rowsum(dP P))
    softmax_row_backward(dP + i * Tk, true, dP + i * Tk, P + i * Tk, Tk, h.len(i), h.keep_row(i)); // (in place)
  const T* dS = dP;
  if (dQ) gemm1(false, false, Tq, dh, Tk, scale, dS, Tk, h.K, h.ldk, first_write_beta<T>(q_first), dQ, h.ldq); // (1) dQ = s dS K
  if (dK) gemm1(true, false, Tk, dh, Tq, scale, dS, Tk, h.Q, h.ldq, first_write_beta<T>(k_first), dK, h.ldk);  // (1) dK = s dS^T Q
  if (dQ) flush_subnormal(dQ, Tq, dh, h.ldq);
  if (dK) flush_subnormal(dK, Tk, dh, h.ldk);
}

// ---- one head, FlashAttention-2 tiling ----------------------------------------------------------
constexpr double kInf = std::numeric_limits<double>::infinity();

// The keys query rows [i0, i0 + rows) need: up to the longest kept prefix among them.
template <typename T> std::int64_t keys_needed(const Head<T>& h, std::int64_t i0, std::int64_t rows) {
  if (!h.lens) return h.Tk;
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < rows; ++r) n = std::max(n, h.len(i0 + r));
  return n;
}

// Sets the masked entries of score row i (keys j0 .. j0 + n) to `value` (-inf: masks the scores).
template <typename T>
void mask_row(T* s, const Head<T>& h, std::int64_t i, std::int64_t j0, std::int64_t n, T value = static_cast<T>(-kInf)) {
  const std::int64_t kept = std::clamp<std::int64_t>(h.len(i) - j0, 0, n);
  std::fill(s + kept, s + n, value); // beyond the row's kept prefix
  if (const std::uint8_t* kr = h.keep_row(i))
    for (std::int64_t c = 0; c < kept; ++c) s[c] = kr[j0 + c] ? s[c] : value;
}

// Whether any of n values is NaN (a query row whose softmax is NaN).
template <typename T> bool any_nan(const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (x[i] != x[i]) return true;
  return false;
}

template <typename T> struct FlashScratch {
  Scratch<T> S, dP, O, m, l, D;
};

// forward, one pair: for each tile of query rows, stream over key tiles keeping the running max m,
// the running sum l of exp(s - m) and the unnormalised output; O = acc / l, lse = m + log l.
template <typename T> void head_flash_forward(T* O, T* lse, const Head<T>& h, T scale, FlashScratch<T>& w) {
  const std::int64_t dh = h.dh;
  for (std::int64_t i0 = 0; i0 < h.Tq; i0 += kFlashQueryTile) {
    const std::int64_t br = std::min(kFlashQueryTile, h.Tq - i0), kend = keys_needed(h, i0, br);
    std::fill(w.m.begin(), w.m.begin() + br, static_cast<T>(-kInf));
    std::fill(w.l.begin(), w.l.begin() + br, T(0));
    std::fill(w.O.begin(), w.O.begin() + br * dh, T(0));
    for (std::int64_t j0 = 0; j0 < kend; j0 += kFlashKeyTile) {
      const std::int64_t bc = std::min(kFlashKeyTile, kend - j0);
      T* S = w.S.data();
      gemm1(false, true, br, bc, dh, scale, h.Q + i0 * h.ldq, h.ldq, h.K + j0 * h.ldk, h.ldk, T(0), S, bc);
      for (std::int64_t r = 0; r < br; ++r) {
        T* s = S + r * bc;
        mask_row(s, h, i0 + r, j0, bc);
        const T m_new = max_nan(w.m[r], max_lanes(s, bc)); // a NaN stays: the row's output is NaN
        if (m_new == static_cast<T>(-kInf)) { // nothing kept in this row so far
          std::fill(s, s + bc, T(0));
          continue;
        }
        const T alpha = exp_any(w.m[r] - m_new); // rescales what was summed under the old max
        for (std::int64_t c = 0; c < bc; ++c) s[c] = exp_any(s[c] - m_new);
        w.l[r] = alpha * w.l[r] + sum_lanes(s, bc);
        for (std::int64_t c = 0; c < dh; ++c) w.O[r * dh + c] *= alpha;
        w.m[r] = m_new;
      }
      gemm1(false, false, br, dh, bc, T(1), S, bc, h.V + j0 * h.ldv, h.ldv, T(1), w.O.data(), dh);
    }
    for (std::int64_t r = 0; r < br; ++r) {
      T* orow = O + (i0 + r) * h.ldo;
      const T l = w.l[r]; // >= 1 once a key is kept (exp(0) at the max), 0 if none is, NaN for a NaN row
      for (std::int64_t c = 0; c < dh; ++c) orow[c] = l == T(0) ? T(0) : w.O[r * dh + c] / l;
      lse[i0 + r] = l == T(0) ? static_cast<T>(kInf) : w.m[r] + std::log(l);
    }
  }
}

// Zeroes a head's rows x dh slice (a first write that the tiles then add into).
template <typename T> void zero_head(T* x, std::int64_t rows, std::int64_t dh, std::int64_t ld) {
  for (std::int64_t i = 0; i < rows; ++i) std::fill(x + i * ld, x + i * ld + dh, T(0));
}

// backward, one pair: per tile pair, P = exp(S - lse) recomputed, then the same lines as
// head_backward with D = rowsum(dO ⊙ O) standing for rowsum(dP ⊙ P) (equal: O = P V, so
// sum_c dO_ic O_ic = sum_j P_ij (dO Vᵀ)_ij), on a tile of br queries x bc keys:
//   (1) S (br x bc) = s Q_i (br x dh) K_jᵀ (dh x bc), then P = exp(S - lse), masked entries 0
//   (3) dV_j (bc x dh) += Pᵀ (bc x br) dO_i (br x dh)
//   (3) dP (br x bc) = dO_i (br x dh) V_jᵀ (dh x bc);   (2) dS = P ⊙ (dP - D), in dP's place
//   (1) dQ_i (br x dh) += s dS (br x bc) K_j (bc x dh); (1) dK_j (bc x dh) += s dSᵀ (bc x br) Q_i (br x dh)
// A NaN query row (lse NaN) has P NaN on every key, masked ones included, as the keep-P forward
// writes it: its tiles then run over all Tk keys. Masked keys get dS = 0 (head_backward's rule) in
// a row whose D or lse is not finite, the only rows where P (dP - D) could be NaN there.
template <typename T>
void head_flash_backward(T* dQ, bool q_first, T* dK, bool k_first, T* dV, bool v_first, const T* dO, const T* O,
                         const T* lse, const Head<T>& h, T scale, FlashScratch<T>& w) {
  const std::int64_t dh = h.dh;
  if (dQ && q_first) zero_head(dQ, h.Tq, dh, h.ldq);
  if (dK && k_first) zero_head(dK, h.Tk, dh, h.ldk);
  if (dV && v_first) zero_head(dV, h.Tk, dh, h.ldv);
  for (std::int64_t i = 0; i < h.Tq; ++i) w.D[i] = dot_lanes(dO + i * h.ldo, O + i * h.ldo, dh);
  for (std::int64_t i0 = 0; i0 < h.Tq; i0 += kFlashQueryTile) {
    const std::int64_t br = std::min(kFlashQueryTile, h.Tq - i0);
    const std::int64_t kend = any_nan(lse + i0, br) ? h.Tk : keys_needed(h, i0, br);
    const T* Qi = h.Q + i0 * h.ldq;
    const T* dOi = dO + i0 * h.ldo;
    for (std::int64_t j0 = 0; j0 < kend; j0 += kFlashKeyTile) {
      const std::int64_t bc = std::min(kFlashKeyTile, kend - j0);
      T *P = w.S.data(), *dP = w.dP.data();
      gemm1(false, true, br, bc, dh, scale, Qi, h.ldq, h.K + j0 * h.ldk, h.ldk, T(0), P, bc); // (1) S = s Q K^T
      for (std::int64_t r = 0; r < br; ++r) {                                               // (2) P = exp(S - lse)
        T* p = P + r * bc;
        mask_row(p, h, i0 + r, j0, bc);
        const T l = lse[i0 + r];
        for (std::int64_t c = 0; c < bc; ++c) p[c] = l == static_cast<T>(kInf) ? T(0) : exp_any(p[c] - l);
      }
      if (dV) gemm1(true, false, bc, dh, br, T(1), P, bc, dOi, h.ldo, T(1), dV + j0 * h.ldv, h.ldv); // (3) dV += P^T dO
      if (!dQ && !dK) continue;
      gemm1(false, true, br, bc, dh, T(1), dOi, h.ldo, h.V + j0 * h.ldv, h.ldv, T(0), dP, bc);      // (3) dP = dO V^T
      for (std::int64_t r = 0; r < br; ++r) {                                                      // (2) dS = P (dP - D)
        for (std::int64_t c = 0; c < bc; ++c) dP[r * bc + c] = P[r * bc + c] * (dP[r * bc + c] - w.D[i0 + r]);
        if (!std::isfinite(w.D[i0 + r]) || !std::isfinite(lse[i0 + r])) mask_row(dP + r * bc, h, i0 + r, j0, bc, T(0));
      }
      if (dQ) gemm1(false, false, br, dh, bc, scale, dP, bc, h.K + j0 * h.ldk, h.ldk, T(1), dQ + i0 * h.ldq, h.ldq);
      if (dK) gemm1(true, false, bc, dh, br, scale, dP, bc, Qi, h.ldq, T(1), dK + j0 * h.ldk, h.ldk); // (1) dQ, dK
    }
  }
  if (dQ) flush_subnormal(dQ, h.Tq, dh, h.ldq);
  if (dK) flush_subnormal(dK, h.Tk, dh, h.ldk);
  if (dV) flush_subnormal(dV, h.Tk, dh, h.ldv);
}

// ---- all pairs ------------------------------------------------------------------------------------
// Runs f(b, h) for every (batch, head) pair, spread over the OpenMP threads when the work pays for
// the hand-off (BLAS kept to one thread meanwhile, as for any batch of gemms).
template <typename F> void for_each_head(const HeadsLayout& L, F&& f) {
  const std::int64_t pairs = L.B * L.H;
  auto one = [&](std::int64_t i) { f(i / L.H, i % L.H); };
  if (small_batch_in_parallel(pairs, L.Tq, L.Tk, L.dh, /*distinct_outputs=*/true))
    run_blas_parallel(pairs, [](void* ctx, std::int64_t i) { (*static_cast<decltype(one)*>(ctx))(i); }, &one);
  else
    for (std::int64_t i = 0; i < pairs; ++i) one(i);
}

template <typename T> T* at_or_null(T* base, std::int64_t offset) { return base ? base + offset : nullptr; }

} // namespace

template <typename T>
void attention_forward(T* o, T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, const KeptKeys& kept,
                       T scale, const WeightsDropout& drop) {
  for_each_head(L, [&](std::int64_t b, std::int64_t h) {
    thread_local Scratch<T> scratch, dropped;
    T* P = p;
    if (P) {
      P += (b * L.H + h) * L.Tq * L.Tk;
    } else {
      scratch.resize(static_cast<std::size_t>(L.Tq * L.Tk));
      P = scratch.data();
    }
    if (drop.keep) dropped.resize(static_cast<std::size_t>(L.Tq * L.Tk));
    head_forward(o + b * L.o_batch + h * L.dh, P, dropped.data(), head_at(q, k, v, L, kept, b, h, drop), scale);
  });
}

template <typename T>
void attention_backward(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout, const T* p,
                        const T* q, const T* k, const T* v, const HeadsLayout& L, T scale, const KeptKeys& kept,
                        const WeightsDropout& drop) {
  for_each_head(L, [&](std::int64_t b, std::int64_t h) {
    thread_local Scratch<T> dP;
    dP.resize(static_cast<std::size_t>(L.Tq * L.Tk));
    head_backward(at_or_null(dq, b * L.q_batch + h * L.dh), dq_first, at_or_null(dk, b * L.k_batch + h * L.dh),
                  dk_first, at_or_null(dv, b * L.v_batch + h * L.dh), dv_first, dP.data(),
                  dout + b * L.o_batch + h * L.dh, p + (b * L.H + h) * L.Tq * L.Tk,
                  head_at(q, k, v, L, kept, b, h, drop), scale);
  });
}

template <typename T>
void flash_attention_forward(T* o, T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L,
                             const KeptKeys& kept, T scale) {
  for_each_head(L, [&](std::int64_t b, std::int64_t h) {
    thread_local FlashScratch<T> w;
    w.S.resize(static_cast<std::size_t>(kFlashQueryTile * kFlashKeyTile));
    w.O.resize(static_cast<std::size_t>(kFlashQueryTile * L.dh));
    w.m.resize(static_cast<std::size_t>(kFlashQueryTile));
    w.l.resize(static_cast<std::size_t>(kFlashQueryTile));
    head_flash_forward(o + b * L.o_batch + h * L.dh, lse + (b * L.H + h) * L.Tq, head_at(q, k, v, L, kept, b, h),
                       scale, w);
  });
}

template <typename T>
void flash_attention_backward(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout,
                              const T* o, const T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L,
                              const KeptKeys& kept, T scale) {
  for_each_head(L, [&](std::int64_t b, std::int64_t h) {
    thread_local FlashScratch<T> w;
    w.S.resize(static_cast<std::size_t>(kFlashQueryTile * kFlashKeyTile));
    w.dP.resize(static_cast<std::size_t>(kFlashQueryTile * kFlashKeyTile));
    w.D.resize(static_cast<std::size_t>(L.Tq));
    const std::int64_t od = b * L.o_batch + h * L.dh;
    head_flash_backward(at_or_null(dq, b * L.q_batch + h * L.dh), dq_first, at_or_null(dk, b * L.k_batch + h * L.dh),
                        dk_first, at_or_null(dv, b * L.v_batch + h * L.dh), dv_first, dout + od, o + od,
                        lse + (b * L.H + h) * L.Tq, head_at(q, k, v, L, kept, b, h), scale, w);
  });
}

#define HEADGRAD_ATTENTION_INSTANCES(T)                                                                             \
  template void attention_forward<T>(T*, T*, const T*, const T*, const T*, const HeadsLayout&, const KeptKeys&, T,   \
                                     const WeightsDropout&);                                                         \
  template void attention_backward<T>(T*, bool, T*, bool, T*, bool, const T*, const T*, const T*, const T*,       \
                                      const T*, const HeadsLayout&, T, const KeptKeys&, const WeightsDropout&);    \
  template void flash_attention_forward<T>(T*, T*, const T*, const T*, const T*, const HeadsLayout&,                \
                                           const KeptKeys&, T);                                                     \
  template void flash_attention_backward<T>(T*, bool, T*, bool, T*, bool, const T*, const T*, const T*, const T*,  \
                                            const T*, const T*, const HeadsLayout&, const KeptKeys&, T);
HEADGRAD_ATTENTION_INSTANCES(float)
HEADGRAD_ATTENTION_INSTANCES(double)

HEADGRAD_ISA_END
} // namespace headgrad::engine
