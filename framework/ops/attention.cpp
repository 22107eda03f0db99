// attention.cpp - fused multi-head attention: d2l's transpose_qkv -> DotProductAttention ->
// transpose_output as one op over the projected queries, keys and values in their natural
// (B, T, heads * dh) layout. The composed ops (models/attention.cpp) stay the textbook version;
// this one is what training runs, proven equal to it by tests/test_fused_attention.cpp.
//
// Per (batch, head) pair, with Q, K, V that head's T x dh columns (kernels/isa/attention_heads.cpp,
// head_forward and head_backward, has the lines side by side):
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
#include <memory>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels/attention_heads.hpp"
#include "framework/ops/attention_mask.hpp"
#include "framework/ops/dropout_draw.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/engine/profiler.hpp"

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
