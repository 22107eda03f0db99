// test_fused_attention.cpp - the fused attention op (framework/ops/attention.cpp) against the
// composed ops it replaces (transpose_qkv -> scaled matmul -> masked softmax -> matmul ->
// transpose_output): same outputs and same gradients for q, k and v, on random shapes and every
// mask form - 1-D and 2-D valid_lens with zero-length rows, causal, a boolean keep mask of every
// shape ((B, Tk), (B, Tq, Tk), per head (B, H, Tq, Tk)), uneven lengths, T = 1 and T not a
// multiple of the flash tile - through both of its algorithms (P kept, and the flash tiling,
// called directly on small shapes and chosen by the op on long ones); and with attention dropout,
// the same result as the composed ops with nn::Dropout from the same generator state, for the op
// and for MultiHeadAttention on both paths.
#include <doctest/doctest.h>

#include <cmath>
#include <fmt/format.h>

#include <set>
#include <string>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/profiler.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "models/attention.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::randn;

namespace {

// The boolean keep mask of a case: none, (B, Tk), (B, Tq, Tk) or per head (B, H, Tq, Tk).
enum class Keep { none, per_batch, per_query, per_head };

struct Case {
  std::int64_t B, H, Tq, Tk, dh;
  std::vector<std::int64_t> lens; // empty, B values, or B * Tq values
  bool causal = false;
  Keep keep = Keep::none; // random flags of that shape
  std::string str() const {
    return fmt::format("B {} H {} Tq {} Tk {} dh {}, lens {}, causal {}, keep form {}", B, H, Tq, Tk, dh, lens.size(),
                       causal, static_cast<int>(keep));
  }
  Dims keep_shape() const {
    return keep == Keep::per_batch ? Dims{B, Tk} : keep == Keep::per_query ? Dims{B, Tq, Tk} : Dims{B, H, Tq, Tk};
  }
};

ops::AttentionMask mask_of(const Case& c) {
  ops::AttentionMask m;
  if (c.lens.size() == static_cast<std::size_t>(c.B)) m.valid_lens = Tensor::from_ints(c.lens, {c.B});
  else if (!c.lens.empty()) m.valid_lens = Tensor::from_ints(c.lens, {c.B, c.Tq});
  m.causal = c.causal;
  if (c.keep != Keep::none) {
    headgrad::Generator g(99);
    std::vector<double> k(static_cast<std::size_t>(c.keep_shape().numel()));
    for (auto& x : k) x = g.uniform() < 0.7 ? 1 : 0;
    m.keep = Tensor::from(k, c.keep_shape(), DType::bool8);
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
          const std::int64_t at = c.keep == Keep::per_batch   ? b * c.Tk + j
                                  : c.keep == Keep::per_query ? (b * c.Tq + i) * c.Tk + j
                                                              : ((b * c.H + h) * c.Tq + i) * c.Tk + j;
          if (!keep.empty()) kept = kept && keep[static_cast<std::size_t>(at)] != 0;
          out.push_back(kept ? 1 : 0);
        }
  return Tensor::from(out, {c.B * c.H, c.Tq, c.Tk}, DType::bool8);
}

// The composed reference: d2l's head split, scaled scores, masked softmax, dropout (when a
// generator is given), weighted sum, merge.
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Case& c, const ops::AttentionMask& m,
                double p = 0, Generator* gen = nullptr) {
  const Tensor qh = models::transpose_qkv(q, c.H), kh = models::transpose_qkv(k, c.H), vh = models::transpose_qkv(v, c.H);
  const Tensor scores = ops::matmul(qh, kh.transpose(1, 2), 1.0 / std::sqrt(double(c.dh)));
  Tensor weights = ops::masked_softmax_keep(scores, keep_per_head(c, m));
  if (gen) weights = ops::dropout(weights, p, /*training=*/true, *gen);
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
    {2, 1, 3, 7, 5, {}, false, Keep::per_query},        // boolean keep mask
    {1, 1, 1, 1, 3, {}},                                // T = 1
    {1, 2, 1, 9, 2, {4}},                               // one query
    {2, 2, 70, 67, 8, {67, 13}},                        // T not a multiple of the 64-row tile
    {1, 2, 130, 130, 4, {}, true, Keep::per_query},     // two and a bit tiles, causal and keep
    {2, 3, 4, 6, 2, {}, false, Keep::per_batch},        // keep (B, Tk)
    {2, 2, 3, 5, 4, {3, 1}, false, Keep::per_head},     // keep per head, with lengths
    {2, 3, 4, 4, 2, {}, true, Keep::per_head},          // keep per head, causal
    {1, 2, 130, 130, 4, {120}, true, Keep::per_head},   // per head, over two and a bit tiles
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
    // the mask as the kernels take it, from its plain definition: every head's flags for a
    // per-head mask, head 0's rows otherwise (the mask is then the same for every head)
    const Tensor keep = keep_per_head(c, m);
    const bool per_head = c.keep == Keep::per_head;
    std::vector<std::uint8_t> kb;
    const auto kv = keep.to_int_vector();
    for (std::int64_t b = 0; b < c.B; ++b)
      for (std::int64_t i = 0; i < (per_head ? c.H : 1) * c.Tq * c.Tk; ++i)
        kb.push_back(static_cast<std::uint8_t>(kv[static_cast<std::size_t>(b * c.H * c.Tq * c.Tk + i)]));
    const kernels::KeptKeys kept{nullptr, kb.data(), per_head};
    const double s = 1 / std::sqrt(double(c.dh));
    const std::size_t nq = static_cast<std::size_t>(c.B * c.Tq * C), nk = static_cast<std::size_t>(c.B * c.Tk * C);
    std::vector<double> o1(nq), o2(nq), P(static_cast<std::size_t>(c.B * c.H * c.Tq * c.Tk)),
        lse(static_cast<std::size_t>(c.B * c.H * c.Tq));
    kernels::attention_forward<double>(o1.data(), P.data(), q.data<double>(), k.data<double>(), v.data<double>(), L,
                                       kept, s, {});
    kernels::flash_attention_forward<double>(o2.data(), lse.data(), q.data<double>(), k.data<double>(),
                                             v.data<double>(), L, kept, s);
    check_close(o2, o1, 1e-12);
    for (bool first : {true, false}) {
      std::vector<double> dq1(nq, first ? NAN : 1.0), dk1(nk, first ? NAN : 1.0), dv1(nk, first ? NAN : 1.0);
      std::vector<double> dq2 = dq1, dk2 = dk1, dv2 = dv1;
      kernels::attention_backward<double>(dq1.data(), first, dk1.data(), first, dv1.data(), first, dO.data<double>(),
                                          P.data(), q.data<double>(), k.data<double>(), v.data<double>(), L, s, {}, {});
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
  for (const Case& c : {Case{1, 2, 400, 400, 4, {390}, true}, Case{1, 2, 400, 400, 4, {}, true, Keep::per_head}}) {
    INFO(c.str());
    REQUIRE(kernels::flash_attention_pays(c.Tq, c.Tk, c.dh));
    const ops::AttentionMask m = mask_of(c);
    const Grads want = run(c, DType::f64, [&](auto& q, auto& k, auto& v) { return composed(q, k, v, c, m); });
    const Grads got = run(c, DType::f64, [&](auto& q, auto& k, auto& v) { return ops::attention(q, k, v, c.H, m); });
    check_same(got, want, 1e-11);
  }
}

TEST_CASE("fused attention with dropout = the composed ops with dropout on the weights, same generator state") {
  for (const Case& c : kCases) {
    INFO(c.str());
    const ops::AttentionMask m = mask_of(c);
    for (DType dt : {DType::f64, DType::f32})
      for (double p : {0.25, 0.6}) {
        CAPTURE(p);
        Generator composed_gen(1234), fused_gen(1234);
        const Grads want = run(c, dt, [&](auto& q, auto& k, auto& v) { return composed(q, k, v, c, m, p, &composed_gen); });
        const Grads got = run(c, dt, [&](auto& q, auto& k, auto& v) {
          return ops::attention(q, k, v, c.H, m, nullptr, 0, {p, &fused_gen});
        });
        check_same(got, want, dt == DType::f64 ? 1e-12 : 2e-5);
        CHECK(fused_gen.state() == composed_gen.state()); // the same draws, and as many
      }
  }
}

TEST_CASE("fused attention with dropout keeps P even on a long sequence, and self_attention drops the same") {
  const Case c{1, 2, 400, 400, 4, {390}, true};
  REQUIRE(kernels::flash_attention_pays(c.Tq, c.Tk, c.dh));
  const ops::AttentionMask m = mask_of(c);
  Generator composed_gen(5), fused_gen(5);
  const Grads want = run(c, DType::f64, [&](auto& q, auto& k, auto& v) { return composed(q, k, v, c, m, 0.1, &composed_gen); });
  const Grads got = run(c, DType::f64, [&](auto& q, auto& k, auto& v) {
    return ops::attention(q, k, v, c.H, m, nullptr, 0, {0.1, &fused_gen});
  });
  check_same(got, want, 1e-11);
  // self_attention from the packed qkv: the same flags from the same state
  const std::int64_t C = c.H * c.dh;
  const Tensor x = randn({2, 5, 3 * C}, 16);
  Generator g1(8), g2(8);
  const Tensor packed = ops::self_attention(x, c.H, {}, nullptr, 0, {0.5, &g1});
  const Tensor split = ops::attention(x.slice(2, 0, C), x.slice(2, C, 2 * C), x.slice(2, 2 * C, 3 * C), c.H, {},
                                      nullptr, 0, {0.5, &g2});
  check_close(packed.to_vector(), split.to_vector(), 1e-14);
  // p = 0 draws nothing; p out of [0, 1) or no generator is refused
  Generator g3(8);
  (void)ops::attention(x.slice(2, 0, C), x.slice(2, C, 2 * C), x.slice(2, 2 * C, 3 * C), c.H, {}, nullptr, 0, {0.0, &g3});
  CHECK(g3.state() == Generator(8).state());
  CHECK_THROWS_AS(ops::self_attention(x, c.H, {}, nullptr, 0, {1.0, &g3}), std::invalid_argument);
  CHECK_THROWS_AS(ops::self_attention(x, c.H, {}, nullptr, 0, {0.5, nullptr}), std::invalid_argument);
}

TEST_CASE("dropout kernels: A = P F between the softmax and V, backward through F; flags all kept = no dropout") {
  const Case c{2, 2, 3, 5, 4, {4, 2}};
  const ops::AttentionMask m = mask_of(c);
  const std::int64_t C = c.H * c.dh, n = c.B * c.H * c.Tq * c.Tk;
  const Tensor q = randn({c.B, c.Tq, C}, 17), k = randn({c.B, c.Tk, C}, 18), v = randn({c.B, c.Tk, C}, 19),
               dO = randn({c.B, c.Tq, C}, 20);
  const kernels::HeadsLayout L{c.B, c.H, c.Tq, c.Tk, c.dh, C, C, C, C, c.Tq * C, c.Tk * C, c.Tk * C, c.Tq * C};
  const std::vector<std::int64_t> lens = {4, 4, 4, 2, 2, 2}; // (b, query): the case's lengths
  const kernels::KeptKeys kept{lens.data(), nullptr};
  std::vector<std::uint8_t> flags(static_cast<std::size_t>(n)), all(static_cast<std::size_t>(n), 1);
  Generator g(21);
  for (auto& f : flags) f = g.uniform() < 0.3 ? 0 : 1;
  const double s = 1 / std::sqrt(double(c.dh)), scale = 1 / 0.7;
  const std::size_t nq = static_cast<std::size_t>(c.B * c.Tq * C), nk = static_cast<std::size_t>(c.B * c.Tk * C);
  auto forward = [&](const std::uint8_t* f, double fs, std::vector<double>& P) {
    std::vector<double> o(nq);
    P.assign(static_cast<std::size_t>(n), 0);
    kernels::attention_forward<double>(o.data(), P.data(), q.data<double>(), k.data<double>(), v.data<double>(), L,
                                       kept, s, {f, fs});
    return o;
  };
  auto backward = [&](const std::uint8_t* f, double fs, const std::vector<double>& P) {
    std::vector<double> dq(nq), dk(nk), dv(nk);
    kernels::attention_backward<double>(dq.data(), true, dk.data(), true, dv.data(), true, dO.data<double>(), P.data(),
                                        q.data<double>(), k.data<double>(), v.data<double>(), L, s, kept, {f, fs});
    return std::vector<std::vector<double>>{dq, dk, dv};
  };
  std::vector<double> P0, P1, P2;
  const auto o0 = forward(nullptr, 1, P0), o1 = forward(all.data(), 1, P1), o2 = forward(flags.data(), scale, P2);
  CHECK(o1 == o0); // every flag kept, scale 1: no dropout, exactly
  CHECK(P2 == P0); // the weights handed out are P, before dropout
  CHECK(backward(all.data(), 1, P1) == backward(nullptr, 1, P0));
  // against the composed ops with the same flags as a dropout_with_mask mask
  const Tensor mask = Tensor::from(std::vector<double>(flags.begin(), flags.end()), {c.B * c.H, c.Tq, c.Tk}, DType::f64);
  Tensor ql = q.detach(), kl = k.detach(), vl = v.detach();
  for (Tensor* t : {&ql, &kl, &vl}) t->set_requires_grad(true);
  const Tensor qh = models::transpose_qkv(ql, c.H), kh = models::transpose_qkv(kl, c.H), vh = models::transpose_qkv(vl, c.H);
  const Tensor P = ops::masked_softmax_keep(ops::matmul(qh, kh.transpose(1, 2), s), keep_per_head(c, m));
  const Tensor out = models::transpose_output(ops::matmul(ops::dropout_with_mask(P, mask, 0.3), vh), c.H);
  ops::sum(out * dO).backward();
  check_close(o2, out.to_vector(), 1e-12);
  const auto grads = backward(flags.data(), scale, P2);
  check_close(grads[0], ql.grad().to_vector(), 1e-12);
  check_close(grads[1], kl.grad().to_vector(), 1e-12);
  check_close(grads[2], vl.grad().to_vector(), 1e-12);
}

TEST_CASE("MultiHeadAttention with attention dropout: fused = composed from the same seed, nothing falls back") {
  for (bool self : {true, false}) {
    CAPTURE(self);
    Generator g1(30), g2(30);
    models::MultiHeadAttention composed_mha(4, 4, 4, 8, 2, 0.4, true, g1, DType::f64);
    models::MultiHeadAttention fused_mha(4, 4, 4, 8, 2, 0.4, true, g2, DType::f64);
    fused_mha.path = models::AttentionPath::fused;
    const Tensor x = randn({2, 5, 4}, 31), y = randn({2, 6, 4}, 32), lens = Tensor::from_ints({5, 3}, {2});
    profiler_reset();
    profiler_enable(true);
    const Tensor a = self ? fused_mha.forward(x, x, x, lens) : fused_mha.forward(x, y, y, lens);
    profiler_enable(false);
    const Tensor b = self ? composed_mha.forward(x, x, x, lens) : composed_mha.forward(x, y, y, lens);
    check_close(a.to_vector(), b.to_vector(), 1e-12);
    ops::sum(a * a).backward();
    ops::sum(b * b).backward();
    check_close(test_support::gradients_of(fused_mha), test_support::gradients_of(composed_mha), 1e-12);
    CHECK(fused_mha.attention->dropout->gen.state() == composed_mha.attention->dropout->gen.state());
    // the fused forward ran the fused op, with its dropout: no masked_softmax, no dropout op
    std::set<std::string> ran;
    for (const OpProfile& r : profiler_report())
      if (r.forward_calls > 0) ran.insert(r.name);
    CHECK(ran.count("attention") == 1);
    CHECK(ran.count("masked_softmax") == 0);
    CHECK(ran.count("dropout") == 0);
  }
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
