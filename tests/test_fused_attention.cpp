// test_fused_attention.cpp - the fused attention op (framework/ops/attention.cpp) against the
// composed ops it replaces (transpose_qkv -> scaled matmul -> masked softmax -> matmul ->
// transpose_output): same outputs and same gradients for q, k and v, on random shapes and every
// mask form - 1-D and 2-D valid_lens with zero-length rows, causal, a boolean keep mask, uneven
// lengths, T = 1 and T not a multiple of the flash tile - through both of its algorithms (P
// kept, and the flash tiling, called directly on small shapes and chosen by the op on long ones).
#include <doctest/doctest.h>

#include <cmath>
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/attention_heads.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "models/attention.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::randn;

namespace {

struct Case {
  std::int64_t B, H, Tq, Tk, dh;
  std::vector<std::int64_t> lens; // empty, B values, or B * Tq values
  bool causal = false;
  bool keep = false; // a random boolean keep mask (B, Tq, Tk)
  std::string str() const {
    return fmt::format("B {} H {} Tq {} Tk {} dh {}, lens {}, causal {}, keep {}", B, H, Tq, Tk, dh, lens.size(),
                       causal, keep);
  }
};

ops::AttentionMask mask_of(const Case& c) {
  ops::AttentionMask m;
  if (c.lens.size() == static_cast<std::size_t>(c.B)) m.valid_lens = Tensor::from_ints(c.lens, {c.B});
  else if (!c.lens.empty()) m.valid_lens = Tensor::from_ints(c.lens, {c.B, c.Tq});
  m.causal = c.causal;
  if (c.keep) {
    headgrad::Generator g(99);
    std::vector<double> k(static_cast<std::size_t>(c.B * c.Tq * c.Tk));
    for (auto& x : k) x = g.uniform() < 0.7 ? 1 : 0;
    m.keep = Tensor::from(k, {c.B, c.Tq, c.Tk}, DType::bool8);
  }
  return m;
}

// The mask as one boolean (B * H, Tq, Tk) tensor, written out by plain loops from its definition.
Tensor keep_per_head(const Case& c, const ops::AttentionMask& m) {
  const auto keep = m.keep.defined() ? m.keep.to_int_vector() : std::vector<std::int64_t>();
  std::vector<double> out;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t h = 0; h < c.H; ++h)
      for (std::int64_t i = 0; i < c.Tq; ++i)
        for (std::int64_t j = 0; j < c.Tk; ++j) {
          bool kept = true;
          if (c.lens.size() == static_cast<std::size_t>(c.B)) kept = j < c.lens[static_cast<std::size_t>(b)];
          else if (!c.lens.empty()) kept = j < c.lens[static_cast<std::size_t>(b * c.Tq + i)];
          if (c.causal) kept = kept && j <= i;
          if (!keep.empty()) kept = kept && keep[static_cast<std::size_t>((b * c.Tq + i) * c.Tk + j)] != 0;
          out.push_back(kept ? 1 : 0);
        }
  return Tensor::from(out, {c.B * c.H, c.Tq, c.Tk}, DType::bool8);
}

// The composed reference: d2l's head split, scaled scores, masked softmax, weighted sum, merge.
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Case& c, const ops::AttentionMask& m) {
  const Tensor qh = models::transpose_qkv(q, c.H), kh = models::transpose_qkv(k, c.H), vh = models::transpose_qkv(v, c.H);
  const Tensor scores = ops::matmul(qh, kh.transpose(1, 2), 1.0 / std::sqrt(double(c.dh)));
  const Tensor weights = ops::masked_softmax_keep(scores, keep_per_head(c, m));
  return models::transpose_output(ops::matmul(weights, vh), c.H);
}

struct Grads {
  std::vector<double> out, dq, dk, dv;
};

// out and the gradients of sum(out * R) for q, k, v through `f`.
template <typename F> Grads run(const Case& c, DType dtype, F&& f) {
  const std::int64_t C = c.H * c.dh;
  Tensor q = randn({c.B, c.Tq, C}, 1, dtype), k = randn({c.B, c.Tk, C}, 2, dtype), v = randn({c.B, c.Tk, C}, 3, dtype);
  const Tensor R = randn({c.B, c.Tq, C}, 4, dtype);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  const Tensor out = f(q, k, v);
  ops::sum(out * R).backward();
  return {out.to_vector(), q.grad().to_vector(), k.grad().to_vector(), v.grad().to_vector()};
}

void check_same(const Grads& a, const Grads& b, double tol) {
  check_close(a.out, b.out, tol);
  check_close(a.dq, b.dq, tol);
  check_close(a.dk, b.dk, tol);
  check_close(a.dv, b.dv, tol);
}

const std::vector<Case> kCases = {
    {2, 2, 3, 5, 4, {3, 0}},                           // 1-D lens, one batch row fully masked
    {2, 3, 4, 4, 2, {1, 4, 0, 2, 3, 3, 4, 1}},         // 2-D lens with a zero-length row
    {1, 2, 6, 6, 3, {}, true},                          // causal
    {2, 2, 5, 5, 4, {5, 2}, true},                      // causal and 1-D lens (uneven)
    {2, 1, 3, 7, 5, {}, false, true},                   // boolean keep mask
    {1, 1, 1, 1, 3, {}},                                // T = 1
    {1, 2, 1, 9, 2, {4}},                               // one query
    {2, 2, 70, 67, 8, {67, 13}},                        // T not a multiple of the 64-row tile
    {1, 2, 130, 130, 4, {}, true, true},                // two and a bit tiles, causal and keep
};

} // namespace

TEST_CASE("fused attention = the composed ops: outputs and q/k/v gradients, float64 and float32") {
  for (const Case& c : kCases) {
    INFO(c.str());
    const ops::AttentionMask m = mask_of(c);
    for (DType dt : {DType::f64, DType::f32}) {
      const Grads want = run(c, dt, [&](auto& q, auto& k, auto& v) { return composed(q, k, v, c, m); });
      const Grads got = run(c, dt, [&](auto& q, auto& k, auto& v) { return ops::attention(q, k, v, c.H, m); });
      check_same(got, want, dt == DType::f64 ? 1e-12 : 2e-5);
    }
  }
}

TEST_CASE("fused self-attention from one packed qkv = attention(q, k, v), gradients into d(qkv)") {
  for (const Case& c : kCases) {
    if (c.Tq != c.Tk) continue;
    INFO(c.str());
    const ops::AttentionMask m = mask_of(c);
    const std::int64_t C = c.H * c.dh;
    Tensor x = randn({c.B, c.Tq, 3 * C}, 5);
    x.set_requires_grad(true);
    const Tensor R = randn({c.B, c.Tq, C}, 6);
    ops::sum(ops::self_attention(x, c.H, m) * R).backward();
    Tensor x2 = x.detach().contiguous();
    x2.set_requires_grad(true);
    const Tensor ref = ops::attention(x2.slice(2, 0, C), x2.slice(2, C, 2 * C), x2.slice(2, 2 * C, 3 * C), c.H, m);
    ops::sum(ref * R).backward();
    check_close(x.grad().to_vector(), x2.grad().to_vector(), 1e-12);
  }
}

TEST_CASE("flash kernels = the kernels that keep P, on the same small shapes (tiles partly filled)") {
  for (const Case& c : kCases) {
    INFO(c.str());
    const ops::AttentionMask m = mask_of(c);
    const std::int64_t C = c.H * c.dh;
    const Tensor q = randn({c.B, c.Tq, C}, 7), k = randn({c.B, c.Tk, C}, 8), v = randn({c.B, c.Tk, C}, 9),
                 dO = randn({c.B, c.Tq, C}, 10);
    const kernels::HeadsLayout L{c.B, c.H, c.Tq, c.Tk, c.dh, C, C, C, C, c.Tq * C, c.Tk * C, c.Tk * C, c.Tq * C};
    // the mask as the kernels take it, from its plain definition
    const Tensor keep = keep_per_head(c, m);
    std::vector<std::uint8_t> kb;
    const auto kv = keep.to_int_vector();
    for (std::int64_t b = 0; b < c.B; ++b) // head 0's rows: the mask is the same for every head
      for (std::int64_t i = 0; i < c.Tq * c.Tk; ++i) kb.push_back(static_cast<std::uint8_t>(kv[static_cast<std::size_t>(b * c.H * c.Tq * c.Tk + i)]));
    const kernels::KeptKeys kept{nullptr, kb.data()};
    const double s = 1 / std::sqrt(double(c.dh));
    const std::size_t nq = static_cast<std::size_t>(c.B * c.Tq * C), nk = static_cast<std::size_t>(c.B * c.Tk * C);
    std::vector<double> o1(nq), o2(nq), P(static_cast<std::size_t>(c.B * c.H * c.Tq * c.Tk)),
        lse(static_cast<std::size_t>(c.B * c.H * c.Tq));
    kernels::attention_forward<double>(o1.data(), P.data(), q.data<double>(), k.data<double>(), v.data<double>(), L,
                                       kept, s);
    kernels::flash_attention_forward<double>(o2.data(), lse.data(), q.data<double>(), k.data<double>(),
                                             v.data<double>(), L, kept, s);
    check_close(o2, o1, 1e-12);
    for (bool first : {true, false}) {
      std::vector<double> dq1(nq, first ? NAN : 1.0), dk1(nk, first ? NAN : 1.0), dv1(nk, first ? NAN : 1.0);
      std::vector<double> dq2 = dq1, dk2 = dk1, dv2 = dv1;
      kernels::attention_backward<double>(dq1.data(), first, dk1.data(), first, dv1.data(), first, dO.data<double>(),
                                          P.data(), q.data<double>(), k.data<double>(), v.data<double>(), L, s);
      kernels::flash_attention_backward<double>(dq2.data(), first, dk2.data(), first, dv2.data(), first,
                                                dO.data<double>(), o2.data(), lse.data(), q.data<double>(),
                                                k.data<double>(), v.data<double>(), L, kept, s);
      check_close(dq2, dq1, 1e-12);
      check_close(dk2, dk1, 1e-12);
      check_close(dv2, dv1, 1e-12);
    }
  }
}

TEST_CASE("fused attention on a long sequence takes the flash path and still equals the composed ops") {
  const Case c{1, 2, 400, 400, 4, {390}, true};
  REQUIRE(kernels::flash_attention_pays(c.Tq, c.Tk, c.dh));
  const ops::AttentionMask m = mask_of(c);
  const Grads want = run(c, DType::f64, [&](auto& q, auto& k, auto& v) { return composed(q, k, v, c, m); });
  const Grads got = run(c, DType::f64, [&](auto& q, auto& k, auto& v) { return ops::attention(q, k, v, c.H, m); });
  check_same(got, want, 1e-11);
}

TEST_CASE("fused attention: the weights it hands out are d2l's, zero where masked") {
  const Case c{2, 2, 3, 4, 2, {3, 1}};
  const ops::AttentionMask m = mask_of(c);
  Tensor w;
  const Tensor q = randn({2, 3, 4}, 11), k = randn({2, 4, 4}, 12);
  (void)ops::attention(q, k, k, 2, m, &w);
  REQUIRE(w.shape() == Dims{2, 2, 3, 4});
  const Tensor ref = ops::masked_softmax(
      ops::matmul(models::transpose_qkv(q, 2), models::transpose_qkv(k, 2).transpose(1, 2), 1 / std::sqrt(2.0)),
      models::repeat_interleave(m.valid_lens, 2));
  check_close(w.to_vector(), ref.to_vector(), 1e-14);
  const auto wv = w.to_vector();
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 1; j < 4; ++j) CHECK(wv[static_cast<std::size_t>(((1 * 2 + h) * 3 + i) * 4 + j)] == 0.0);
}

TEST_CASE("fused attention: keys = values (one tensor) gets both gradients, and bad shapes are refused") {
  const Case c{2, 2, 3, 4, 2, {4, 2}};
  const ops::AttentionMask m = mask_of(c);
  Tensor q = randn({2, 3, 4}, 13), y = randn({2, 4, 4}, 14);
  q.set_requires_grad(true);
  y.set_requires_grad(true);
  const Tensor R = randn({2, 3, 4}, 15);
  ops::sum(ops::attention(q, y, y, 2, m) * R).backward();
  const auto fused = y.grad().to_vector();
  y.zero_grad();
  ops::sum(composed(q, y, y, c, m) * R).backward();
  check_close(fused, y.grad().to_vector(), 1e-12);
  CHECK_THROWS_AS(ops::attention(q, y, y, 3, m), std::invalid_argument);                      // 4 % 3
  CHECK_THROWS_AS(ops::attention(q, randn({2, 5, 4}, 1), y, 2), std::invalid_argument);        // Tk differs
  ops::AttentionMask negative;
  negative.valid_lens = Tensor::from_ints({-1, 1}, {2});
  CHECK_THROWS_AS(ops::attention(q, y, y, 2, negative), std::invalid_argument); // len < 0 (len > Tk keeps all keys)
  CHECK_THROWS_AS(ops::self_attention(randn({2, 3, 8}, 1), 2), std::invalid_argument);         // 8 % (3 * 2)
}
