// attention.cpp - fused multi-head attention: d2l's transpose_qkv -> DotProductAttention ->
// transpose_output as one op over the projected queries, keys and values in their natural
// (B, T, heads * dh) layout. The composed ops (models/attention.cpp) stay the textbook version;
// this one is what training runs, proven equal to it by tests/test_fused_attention.cpp.
//
// Per (batch, head) pair, with Q, K, V that head's T x dh columns (the book's loops below, and the
// engine's head_forward and head_backward in framework/engine/kernels/isa/attention_heads.cpp):
//   forward:  (1) S = s Q K^T   (2) P = softmax over kept keys (S)   (2b) A = P F   (3) O = A V
//   VJP:      (3) dV += A^T dO,  dA = dO V^T
//             (2b) dP = dA F
//             (2) dS = P (dP - rowsum(dP P))       (masked keys: P = 0, so dS = 0)
//             (1) dQ += s dS K,  dK += s dS^T Q
//   shapes:   Q, dQ (B, Tq, H dh); K, V, dK, dV (B, Tk, H dh); O, dO (B, Tq, H dh); P, A, F (B, H, Tq, Tk)
// F is attention dropout's factor (F = m / (1 - p), m ~ Bernoulli(1 - p); without dropout F = 1,
// A = P). Short sequences keep P for the backward; long ones keep only O and each row's
// log-sum-exp and recompute P tile by tile (FlashAttention-2), so memory stays linear in T - not
// with dropout, whose flags F are per weight: then P is kept whatever the length.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/attention_mask.hpp"
#include "framework/ops/dropout_draw.hpp"
#include "framework/ops/nn_ops.hpp"

// The book's loops of the kernels (kernels::attention_forward, ...): one (batch, head) pair at a time,
// the steps above as the book's gemm (matmul.cpp) and softmax loops (masked_softmax.cpp). The
// engine's kernels (framework/engine/kernels/isa/attention_heads.cpp) run the same steps with BLAS
// or row by row at the vector width, and the flash pair tile by tile.
namespace headgrad::book {
namespace {

// One (batch, head) pair: its matrices Q (Tq x dh), K and V (Tk x dh) and O (Tq x dh) read in place
// with their row strides, its rows' kept lengths and keep flags (as softmax_forward takes them),
// the offset of its weights (Tq x Tk) and of its rows' log-sum-exps, and its dropout flags.
template <typename T> struct Pair {
  const T *q, *k, *v;
  std::int64_t o, p, lse; // offsets: into O's and dO's layout, into P, into lse
  const std::int64_t* lens;
  const std::uint8_t *keep, *drop;
};
template <typename T>
Pair<T> pair(const T* q, const T* k, const T* v, const HeadsLayout& L, const KeptKeys& kept, const WeightsDropout& drop,
             std::int64_t b, std::int64_t h) {
  const std::int64_t bh = b * L.H + h;
  return {q + b * L.q_batch + h * L.dh, k + b * L.k_batch + h * L.dh, v + b * L.v_batch + h * L.dh,
          b * L.o_batch + h * L.dh, bh * L.Tq * L.Tk, bh * L.Tq,
          kept.lens ? kept.lens + b * L.Tq : nullptr,
          kept.keep ? kept.keep + (kept.keep_per_head ? bh : b) * L.Tq * L.Tk : nullptr,
          drop.keep ? drop.keep + bh * L.Tq * L.Tk : nullptr};
}
template <typename F> void for_each_pair(const HeadsLayout& L, F&& f) {
  for (std::int64_t b = 0; b < L.B; ++b)
    for (std::int64_t h = 0; h < L.H; ++h) f(b, h);
}

// (2b) A = P F: F = scale where the dropout flag keeps the weight, 0 where it drops it (no flags:
// A = P).
template <typename T> void drop_weights(T* a, const T* p, const std::uint8_t* keep, double scale, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) a[i] = keep ? p[i] * (keep[i] ? static_cast<T>(scale) : T(0)) : p[i];
}

// A gradient of q's, k's or v's layout written by every pair's products: zeroed on a first write,
// so that they all add.
template <typename T> void zero(T* x, bool first, const HeadsLayout& L, std::int64_t rows, std::int64_t row,
                                std::int64_t batch) {
  if (!x || !first) return;
  for (std::int64_t b = 0; b < L.B; ++b)
    for (std::int64_t t = 0; t < rows; ++t) std::fill_n(x + b * batch + t * row, L.H * L.dh, T(0));
}

// The backward's lines for one pair, given its weights P: (3) dV += A^T dO, dA = dO V^T;
// (2b) dP = dA F; (2) dS = softmax's VJP of dP (masked keys 0); (1) dQ += s dS K, dK += s dS^T Q.
template <typename T>
void pair_backward(T* dq, T* dk, T* dv, const T* dout, const T* P, const Pair<T>& x, const HeadsLayout& L, T scale,
                   double drop_scale, std::vector<T>& A, std::vector<T>& dS) {
  const std::int64_t Tq = L.Tq, Tk = L.Tk, dh = L.dh;
  drop_weights(A.data(), P, x.drop, drop_scale, Tq * Tk);
  if (dv) gemm<T>(true, false, Tk, dh, Tq, T(1), A.data(), Tk, dout + x.o, L.o_row, T(1), dv, L.v_row);
  gemm<T>(false, true, Tq, Tk, dh, T(1), dout + x.o, L.o_row, x.v, L.v_row, T(0), A.data(), Tk);
  drop_weights(A.data(), A.data(), x.drop, drop_scale, Tq * Tk);
  softmax_backward<T>(dS.data(), true, A.data(), P, x.lens, x.keep, Tq, Tk);
  if (dq) gemm<T>(false, false, Tq, dh, Tk, scale, dS.data(), Tk, x.k, L.k_row, T(1), dq, L.q_row);
  if (dk) gemm<T>(true, false, Tk, dh, Tq, scale, dS.data(), Tk, x.q, L.q_row, T(1), dk, L.k_row);
}

} // namespace

// forward:  per pair: (1) S = s Q K^T  (2) P = softmax over each row's kept keys (S)  (2b) A = P F
//           (3) O = A V.  P (B, H, Tq, Tk) is written where p is not null.
template <typename T>
void attention_forward(T* o, T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, const KeptKeys& kept,
                       T scale, const WeightsDropout& drop) {
  std::vector<T> S(static_cast<std::size_t>(L.Tq * L.Tk)), A(S.size());
  for_each_pair(L, [&](std::int64_t b, std::int64_t h) {
    const Pair<T> x = pair(q, k, v, L, kept, drop, b, h);
    T* P = p ? p + x.p : S.data();
    gemm<T>(false, true, L.Tq, L.Tk, L.dh, scale, x.q, L.q_row, x.k, L.k_row, T(0), P, L.Tk);
    softmax_forward<T>(P, P, x.lens, x.keep, L.Tq, L.Tk);
    drop_weights(A.data(), P, x.drop, drop.scale, L.Tq * L.Tk);
    gemm<T>(false, false, L.Tq, L.dh, L.Tk, T(1), A.data(), L.Tk, x.v, L.v_row, T(0), o + x.o, L.o_row);
  });
}
HEADGRAD_BOOK_LOOP(attention_forward);

// backward: the VJP above, given the forward's P; dq, dk, dv may each be null (not needed).
template <typename T>
void attention_backward(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout, const T* p,
                        const T* q, const T* k, const T* v, const HeadsLayout& L, T scale, const KeptKeys& kept,
                        const WeightsDropout& drop) {
  zero(dq, dq_first, L, L.Tq, L.q_row, L.q_batch);
  zero(dk, dk_first, L, L.Tk, L.k_row, L.k_batch);
  zero(dv, dv_first, L, L.Tk, L.v_row, L.v_batch);
  std::vector<T> A(static_cast<std::size_t>(L.Tq * L.Tk)), dS(A.size());
  for_each_pair(L, [&](std::int64_t b, std::int64_t h) {
    const Pair<T> x = pair(q, k, v, L, kept, drop, b, h);
    const std::int64_t q_at = b * L.q_batch + h * L.dh, k_at = b * L.k_batch + h * L.dh;
    pair_backward(dq ? dq + q_at : nullptr, dk ? dk + k_at : nullptr, dv ? dv + b * L.v_batch + h * L.dh : nullptr,
                  dout, p + x.p, x, L, scale, drop.scale, A, dS);
  });
}
HEADGRAD_BOOK_LOOP(attention_backward);

// The same forward keeping, instead of P, lse (B, H, Tq): each row's log-sum-exp of its kept scores
// S, log sum_j exp(S_j) over the kept j = S_j - log P_j for any kept j (P_j = exp(S_j - lse)):
// taken at the row's largest weight; +inf for a row that keeps nothing (or only -inf), NaN for a
// row holding a NaN.
template <typename T>
void flash_attention_forward(T* o, T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L,
                             const KeptKeys& kept, T scale) {
  std::vector<T> P(static_cast<std::size_t>(L.B * L.H * L.Tq * L.Tk)), S(static_cast<std::size_t>(L.Tq * L.Tk));
  book::attention_forward<T>(o, P.data(), q, k, v, L, kept, scale, {}); // (book::: kernels:: is found by the arguments)
  for_each_pair(L, [&](std::int64_t b, std::int64_t h) {
    const Pair<T> x = pair(q, k, v, L, kept, {}, b, h);
    gemm<T>(false, true, L.Tq, L.Tk, L.dh, scale, x.q, L.q_row, x.k, L.k_row, T(0), S.data(), L.Tk);
    for (std::int64_t i = 0; i < L.Tq; ++i) {
      const T* Pi = P.data() + x.p + i * L.Tk;
      const std::int64_t j = std::max_element(Pi, Pi + L.Tk) - Pi;
      const T w = j < L.Tk ? Pi[j] : T(0); // (no keys at all: nothing kept)
      lse[x.lse + i] = w != w ? w : w == T(0) ? std::numeric_limits<T>::infinity()
                                              : S[static_cast<std::size_t>(i * L.Tk + j)] - std::log(w);
    }
  });
}
HEADGRAD_BOOK_LOOP(flash_attention_forward);

// Its backward: each pair's weights recomputed from the scores and lse, P = exp(S - lse) on the kept
// keys (0 elsewhere, and in a row that keeps nothing), then the backward above. (The engine's tiles
// use D = rowsum(dO O) for rowsum(dP P), equal since O = P V: that is why they take o.)
template <typename T>
void flash_attention_backward(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, const T* dout,
                              const T* /*o*/, const T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L,
                              const KeptKeys& kept, T scale) {
  std::vector<T> P(static_cast<std::size_t>(L.B * L.H * L.Tq * L.Tk));
  for_each_pair(L, [&](std::int64_t b, std::int64_t h) {
    const Pair<T> x = pair(q, k, v, L, kept, {}, b, h);
    T* Pp = P.data() + x.p;
    gemm<T>(false, true, L.Tq, L.Tk, L.dh, scale, x.q, L.q_row, x.k, L.k_row, T(0), Pp, L.Tk);
    constexpr T kInf = std::numeric_limits<T>::infinity();
    for (std::int64_t i = 0; i < L.Tq; ++i)
      for (std::int64_t j = 0; j < L.Tk; ++j) {
        const bool masked = (x.lens && j >= x.lens[i]) || (x.keep && !x.keep[i * L.Tk + j]);
        T& w = Pp[i * L.Tk + j];
        const T l = lse[x.lse + i];
        w = l == kInf ? T(0) : std::exp((masked ? -kInf : w) - l);
      }
  });
  book::attention_backward<T>(dq, dq_first, dk, dk_first, dv, dv_first, dout, P.data(), q, k, v, L, scale, kept, {});
}
HEADGRAD_BOOK_LOOP(flash_attention_backward);

} // namespace headgrad::book

namespace headgrad::ops {
namespace {

// What the backward needs besides the inputs: P (short sequences, or dropout) or O and lse (long
// ones), and the dropout flags.
struct Saved {
  kernels::HeadsLayout layout;
  KeptKeys kept;
  std::vector<std::uint8_t> drop; // (B, H, Tq, Tk) dropout keep flags, or empty: no dropout
  double drop_scale = 1;          // 1 / (1 - p)
  Tensor P, O, lse;
  double scale;
  kernels::WeightsDropout dropout() const { return {drop.empty() ? nullptr : drop.data(), drop_scale}; }
};

// The dropout flags for P's (B, H, Tq, Tk) weights, drawn as ops::dropout draws its mask (one
// draw per element, in order, dropout_keeps), into s; none when p = 0.
void draw_dropout(Saved& s, const AttentionDropout& d, const char* op) {
  if (!(d.p >= 0.0 && d.p < 1.0))
    throw std::invalid_argument(fmt::format("{}: dropout p = {} is outside [0, 1)", op, d.p));
  if (d.p == 0.0) return;
  if (!d.gen) throw std::invalid_argument(fmt::format("{}: dropout p = {} needs a generator", op, d.p));
  const kernels::HeadsLayout& L = s.layout;
  s.drop.resize(static_cast<std::size_t>(L.B * L.H * L.Tq * L.Tk));
  for (auto& keep : s.drop) keep = dropout_keeps(*d.gen, d.p);
  s.drop_scale = 1.0 / (1.0 - d.p);
}

// Runs the forward for q, k, v (pointers into their buffers) and returns the output; fills `s`.
Tensor attention_forward(const Tensor& qbuf, std::int64_t q_off, const Tensor& kbuf, std::int64_t k_off,
                         const Tensor& vbuf, std::int64_t v_off, Saved& s, bool keep_weights) {
  const kernels::HeadsLayout& L = s.layout;
  Tensor out = new_tensor({L.B, L.Tq, L.H * L.dh}, qbuf.dtype());
  // The flash tiling takes no dropout (kernels/attention_heads.hpp): with dropout, P is kept.
  const bool flash = !keep_weights && s.drop.empty() && kernels::flash_attention_pays(L.Tq, L.Tk, L.dh);
  if (flash) {
    s.lse = new_tensor({L.B, L.H, L.Tq}, qbuf.dtype());
    s.O = out.detach();
  } else {
    s.P = new_tensor({L.B, L.H, L.Tq, L.Tk}, qbuf.dtype());
  }
  dispatch_float(qbuf.dtype(), "attention", [&]<typename T>() {
    const T *q = qbuf.data<T>() + q_off, *k = kbuf.data<T>() + k_off, *v = vbuf.data<T>() + v_off;
    const T scale = static_cast<T>(s.scale);
    if (flash)
      kernels::flash_attention_forward<T>(out.data<T>(), s.lse.data<T>(), q, k, v, L, s.kept.heads_view(), scale);
    else
      kernels::attention_forward<T>(out.data<T>(), s.P.data<T>(), q, k, v, L, s.kept.heads_view(), scale, s.dropout());
  });
  return out;
}

// The backward for gradient buffers dq, dk, dv at the same offsets as q, k, v.
template <typename T>
void attention_backward(T* dq, bool q_first, T* dk, bool k_first, T* dv, bool v_first, const Tensor& dO, const T* q,
                        const T* k, const T* v, const Saved& s) {
  const T scale = static_cast<T>(s.scale);
  if (s.P.defined())
    kernels::attention_backward<T>(dq, q_first, dk, k_first, dv, v_first, dO.data<T>(), s.P.data<T>(), q, k, v, s.layout,
                                   scale, s.kept.heads_view(), s.dropout());
  else
    kernels::flash_attention_backward<T>(dq, q_first, dk, k_first, dv, v_first, dO.data<T>(), s.O.data<T>(),
                                         s.lse.data<T>(), q, k, v, s.layout, s.kept.heads_view(), scale);
}

// Two of q, k, v are one tensor (e.g. keys = values): their gradients are one buffer that the
// kernels fill head by head, interleaved - so it starts from zeros and every write adds.
void share_buffer(GradBuffer& a, GradBuffer& b) {
  if (!a || !b || !a.tensor.same(b.tensor) || !(a.first_write || b.first_write)) return;
  dispatch_float(a.tensor.dtype(), "attention", [&]<typename T>() {
    std::fill(a.data<T>(), a.data<T>() + a.tensor.numel(), T(0));
  });
  a.first_write = b.first_write = false;
}

void check_3d(const Tensor& t, const char* what, const char* op) {
  if (!t.defined() || t.dim() != 3)
    throw std::invalid_argument(fmt::format("{}: {} must be (batch, T, heads * head_dim), got {}", op, what,
                                            t.defined() ? t.shape().str() : "an undefined tensor"));
}

// How the mask's messages name the scores: their (B, heads, Tq, Tk) shape and the inputs they come from.
std::string scores_of(std::int64_t B, std::int64_t H, std::int64_t Tq, std::int64_t Tk, const Tensor& q,
                      const Tensor& k = Tensor()) {
  return k.defined() ? fmt::format("scores of shape {} (queries {}, keys {})", Dims{B, H, Tq, Tk}, q.shape(), k.shape())
                     : fmt::format("scores of shape {} (qkv {})", Dims{B, H, Tq, Tk}, q.shape());
}

// 0 is the default 1 / sqrt(head_dim) (d2l's DotProductAttention); any other finite scale is used as
// given, a negative one too (the scores change sign).
double scale_or_default(double scale, std::int64_t dh, const char* op) {
  if (!std::isfinite(scale))
    throw std::invalid_argument(fmt::format("{}: scale must be finite (0: 1 / sqrt(head_dim)), got {}", op, scale));
  return scale != 0 ? scale : 1.0 / std::sqrt(double(dh));
}

} // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads, const AttentionMask& mask,
                 Tensor* weights, double scale, const AttentionDropout& dropout) {
  check_3d(q, "queries", "attention");
  check_3d(k, "keys", "attention");
  check_3d(v, "values", "attention");
  const std::int64_t B = q.shape()[0], Tq = q.shape()[1], C = q.shape()[2], Tk = k.shape()[1];
  if (k.shape() != Dims{B, Tk, C} || v.shape() != Dims{B, Tk, C} || q.dtype() != k.dtype() || q.dtype() != v.dtype())
    throw std::invalid_argument(fmt::format("attention: queries {} {}, keys {} {}, values {} {} must share batch, "
                                            "width and dtype (keys and values also their length)",
                                            q.shape(), dtype_name(q.dtype()), k.shape(), dtype_name(k.dtype()),
                                            v.shape(), dtype_name(v.dtype())));
  if (heads <= 0 || C % heads != 0)
    throw std::invalid_argument(fmt::format("attention: width {} of queries {} is not divisible by heads = {}", C,
                                            q.shape(), heads));
  OpTimer timer("attention");
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  auto s = std::make_shared<Saved>();
  s->layout = {B, heads, Tq, Tk, C / heads, C, C, C, C, Tq * C, Tk * C, Tk * C, Tq * C};
  s->kept = kept_keys(mask, {B, heads, Tq, Tk, true, scores_of(B, heads, Tq, Tk, q, k)}, "attention");
  s->scale = scale_or_default(scale, C / heads, "attention");
  draw_dropout(*s, dropout, "attention");
  Tensor out = attention_forward(qc, 0, kc, 0, vc, 0, *s, weights != nullptr);
  if (weights) *weights = s->P.detach();
  return record(out, "attention", {qc, kc, vc}, [s](Node& n, const Tensor& dO) {
    GradBuffer dq = n.grad_buffer(0), dk = n.grad_buffer(1), dv = n.grad_buffer(2);
    share_buffer(dq, dk);
    share_buffer(dq, dv);
    share_buffer(dk, dv);
    const Tensor q = n.input(0), k = n.input(1), v = n.input(2);
    dispatch_float(dO.dtype(), "attention", [&]<typename T>() {
      attention_backward<T>(dq.data<T>(), dq.first_write, dk.data<T>(), dk.first_write, dv.data<T>(), dv.first_write,
                            dO, q.data<T>(), k.data<T>(), v.data<T>(), *s);
    });
  });
}

Tensor self_attention(const Tensor& qkv, std::int64_t heads, const AttentionMask& mask, Tensor* weights,
                      double scale, const AttentionDropout& dropout) {
  check_3d(qkv, "qkv", "self_attention");
  if (!is_float(qkv.dtype()))
    throw std::invalid_argument(fmt::format("self_attention: qkv must be float32 or float64, got {}",
                                            dtype_name(qkv.dtype())));
  const std::int64_t B = qkv.shape()[0], T = qkv.shape()[1], C3 = qkv.shape()[2];
  if (heads <= 0 || C3 % (3 * heads) != 0)
    throw std::invalid_argument(fmt::format("self_attention: width {} of qkv {} is not 3 * heads * head_dim for heads "
                                            "= {}",
                                            C3, qkv.shape(), heads));
  OpTimer timer("attention");
  const std::int64_t C = C3 / 3;
  const Tensor x = qkv.contiguous();
  auto s = std::make_shared<Saved>();
  s->layout = {B, heads, T, T, C / heads, C3, C3, C3, C, T * C3, T * C3, T * C3, T * C};
  s->kept = kept_keys(mask, {B, heads, T, T, true, scores_of(B, heads, T, T, qkv)}, "self_attention");
  s->scale = scale_or_default(scale, C / heads, "self_attention");
  draw_dropout(*s, dropout, "self_attention");
  Tensor out = attention_forward(x, 0, x, C, x, 2 * C, *s, weights != nullptr);
  if (weights) *weights = s->P.detach();
  // q, k, v are the column blocks [0, C), [C, 2C), [2C, 3C) of qkv, and so are their gradients:
  // the kernels write each head's dQ, dK, dV slice straight into d(qkv), every element once.
  return record(out, "attention", {x}, [s, C](Node& n, const Tensor& dO) {
    const GradBuffer dx = n.grad_buffer(0);
    const Tensor x = n.input(0);
    dispatch_float(dO.dtype(), "attention", [&]<typename T>() {
      T* d = dx.data<T>();
      const T* p = x.data<T>();
      attention_backward<T>(d, dx.first_write, d + C, dx.first_write, d + 2 * C, dx.first_write, dO, p, p + C,
                            p + 2 * C, *s);
    });
  });
}

} // namespace headgrad::ops
