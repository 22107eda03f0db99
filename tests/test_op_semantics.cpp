// Op semantics against PyTorch 1.13, second round: NaN through the softmax family, the precision of
// log-softmax and cross-entropy at large logits, the attention scale, layer norm of rows whose
// squared deviations overflow, var/std with a correction above N, and inputs PyTorch accepts that
// were refused. Each test pins PyTorch's value (worked out by hand, or by torch 1.13 where said)
// and names what the code did before.
#include <doctest/doctest.h>

#include <cmath>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace test_support; // check_close, check_same, contains, error_of, kInf, kNaN, leaf, randn

namespace {

using V = std::vector<double>;

// Which elements are NaN.
std::vector<bool> nan_pattern(const V& v) {
  std::vector<bool> p;
  for (double x : v) p.push_back(std::isnan(x));
  return p;
}

bool all_nan(const V& v) {
  for (double x : v)
    if (!std::isnan(x)) return false;
  return !v.empty();
}

} // namespace

// ---- NaN through the softmax family ------------------------------------------------------------

TEST_CASE("softmax: a NaN next to -inf is NaN, not an empty row of zeros") {
  for (DType d : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(d));
    Tensor x = leaf({kNaN, -kInf}, {1, 2}, d);
    Tensor y = ops::softmax(x); // was [0, 0]: the max dropped the NaN, the row looked empty
    check_same(y, {kNaN, kNaN});
    y.backward(Tensor::from({1, 2}, {1, 2}, d));
    CHECK(all_nan(x.grad().to_vector())); // was zero
    check_same(ops::log_softmax(x.detach()), {kNaN, kNaN});
    // a NaN anywhere in a longer row (past a whole lane of -inf) too
    V row(19, -kInf);
    row[17] = kNaN;
    CHECK(all_nan(ops::softmax(Tensor::from(row, {1, 19}, d)).to_vector()));
  }
}

TEST_CASE("softmax along a non-last axis: NaN wherever it is in the column") {
  // PyTorch: NaN for both orders; was 0 for [1, nan, -inf] and NaN for [-inf, 1, nan]
  for (const V& col : {V{1, kNaN, -kInf}, V{-kInf, 1, kNaN}, V{kNaN, -kInf, -kInf}}) {
    Tensor x = leaf(col, {3, 1});
    Tensor y = ops::softmax(x, 0);
    check_same(y, {kNaN, kNaN, kNaN});
    y.backward(Tensor::ones({3, 1}, DType::f64));
    CHECK(all_nan(x.grad().to_vector()));
    check_same(ops::log_softmax(x.detach(), 0), {kNaN, kNaN, kNaN});
  }
  // an all -inf column stays the documented zeros (and NaN in log_softmax, as PyTorch)
  check_same(ops::softmax(Tensor::from({-kInf, -kInf}, {2, 1}, DType::f64), 0), {0, 0});
  check_same(ops::log_softmax(Tensor::from({-kInf, -kInf}, {2, 1}, DType::f64), 0), {kNaN, kNaN});
}

TEST_CASE("masked softmax forms: a NaN among the kept keys makes the whole row NaN, masked keys keep zero gradient") {
  // d2l's masked_softmax (masked keys filled with -1e6) and PyTorch's masked_fill(-inf) + softmax
  // both give NaN on every key of such a row; masked keys get gradient 0 (the fill cuts them off)
  for (DType d : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(d));
    Tensor x = leaf({kNaN, -kInf, 5, 6, 1, 2, 3, 4}, {2, 1, 4}, d);
    Tensor y = ops::masked_softmax(x, Tensor::from_ints({2, 3}, {2})); // row 0 keeps [nan, -inf]: was all 0
    const V v = y.to_vector();
    for (int j = 0; j < 4; ++j) CHECK(std::isnan(v[static_cast<std::size_t>(j)]));
    for (int j = 4; j < 8; ++j) CHECK(std::isfinite(v[static_cast<std::size_t>(j)]));
    y.backward(Tensor::from({1, 2, 3, 4, 1, 2, 3, 4}, {2, 1, 4}, d));
    const V g = x.grad().to_vector();
    CHECK(std::isnan(g[0]));
    CHECK(std::isnan(g[1]));
    CHECK(g[2] == 0); // masked: exactly 0, although y is NaN there
    CHECK(g[3] == 0);
    CHECK(g[7] == 0); // the other row's masked key

    Tensor k = leaf({1, 2, kNaN, 4}, {1, 1, 4}, d);
    Tensor yk = ops::masked_softmax_keep(k, Tensor::from({1, 0, 1, 0}, {1, 4}, DType::bool8));
    CHECK(all_nan(yk.to_vector()));
    yk.backward(Tensor::ones({1, 1, 4}, d));
    const V gk = k.grad().to_vector();
    CHECK(std::isnan(gk[0]));
    CHECK(gk[1] == 0);
    CHECK(std::isnan(gk[2]));
    CHECK(gk[3] == 0);

    // causal: query 0 keeps key 0 only, a NaN there (was a row of zeros: the rest of the lane is -inf)
    Tensor c = leaf({kNaN, 1, 2, 3}, {2, 2}, d);
    Tensor yc = ops::causal_softmax(c);
    const V vc = yc.to_vector();
    CHECK(std::isnan(vc[0]));
    CHECK(std::isnan(vc[1]));
    CHECK(vc[2] + vc[3] == doctest::Approx(1.0));
  }
}

TEST_CASE("masked softmax: a NaN in dy reaches kept keys only; a masked key with a NaN logit changes nothing") {
  Tensor x = leaf({1, 2, kNaN, 4}, {1, 1, 4});
  Tensor y = ops::masked_softmax(x, Tensor::from_ints({2}, {1}));
  CHECK(std::isfinite(y.to_vector()[0]));
  CHECK(y.to_vector()[2] == 0);
  y.backward(Tensor::from({1, 2, kNaN, kInf}, {1, 1, 4}, DType::f64));
  const V g = x.grad().to_vector();
  CHECK(std::isnan(g[0]));
  CHECK(std::isnan(g[1]));
  CHECK(g[2] == 0); // was NaN: 0 * (nan - dot)
  CHECK(g[3] == 0);
}

TEST_CASE("fused attention: a NaN query row outputs NaN on both paths, with the composed ops' gradients") {
  // keep-P (short rows, or weights asked for) and flash (long rows) must agree with each other
  // and with the composed ops on which outputs and gradients are NaN. Was: the NaN row output 0.
  for (const std::int64_t T : {6, 384}) {
    CAPTURE(T);
    const std::int64_t B = 1, H = 2, dh = 4, C = H * dh;
    const bool flash = kernels::flash_attention_pays(T, T, dh);
    CHECK(flash == (T == 384));
    Tensor q = randn({B, T, C}, 1), k = randn({B, T, C}, 2), v = randn({B, T, C}, 3);
    q.data<double>()[0] = kNaN; // query 0, head 0
    // the last key of head 1: masked for every query but the last. The composed ops (PyTorch's too)
    // spread it through 0 * NaN in the matmuls to every query's dQ; the flash path, which skips the
    // tiles of masked keys, does not (a documented difference), so only the short case has it.
    if (T == 6) k.data<double>()[(T - 1) * C + 5] = kNaN;
    const Tensor R = randn({B, T, C}, 4);
    ops::AttentionMask m;
    m.causal = true;
    auto run = [&](bool want_weights) {
      Tensor qq = q.clone(), kk = k.clone(), vv = v.clone();
      for (Tensor* t : {&qq, &kk, &vv}) t->set_requires_grad(true);
      Tensor w;
      const Tensor out = ops::attention(qq, kk, vv, H, m, want_weights ? &w : nullptr);
      ops::sum(out * R).backward();
      return std::vector<V>{out.to_vector(), qq.grad().to_vector(), kk.grad().to_vector(), vv.grad().to_vector()};
    };
    const std::vector<V> keep_p = run(true), fused = run(false);
    const V& out = keep_p[0];
    for (std::int64_t c = 0; c < dh; ++c) CHECK(std::isnan(out[static_cast<std::size_t>(c)]));  // query 0, head 0
    CHECK(std::isfinite(out[static_cast<std::size_t>(dh)]));                                     // query 0, head 1
    CHECK(std::isnan(out[static_cast<std::size_t>((T - 1) * C + dh)]) == (T == 6));              // last query, head 1
    CHECK(std::isfinite(out[static_cast<std::size_t>((T - 2) * C + dh)]));                       // the one before
    for (std::size_t i = 0; i < 4; ++i) {
      CAPTURE(i);
      const auto a = nan_pattern(fused[i]), b = nan_pattern(keep_p[i]);
      CHECK(a == b);
      for (std::size_t j = 0, shown = 0; j < a.size() && shown < 5; ++j)
        if (a[j] != b[j]) {
          ++shown;
          MESSAGE("element " << j << " (row " << j / C << ", col " << j % C << "): fused " << fused[i][j] << ", keep-P "
                              << keep_p[i][j]);
        }
    }
    if (T > 6) continue; // the composed ops on the short case
    Tensor qq = q.clone(), kk = k.clone(), vv = v.clone();
    for (Tensor* t : {&qq, &kk, &vv}) t->set_requires_grad(true);
    auto heads = [&](const Tensor& t) { return ops::permute(ops::reshape(t, {B, T, H, dh}), {0, 2, 1, 3}); };
    const Tensor scores = ops::matmul(heads(qq), ops::transpose(heads(kk), -1, -2), 1 / std::sqrt(double(dh)));
    const Tensor out2 = ops::reshape(ops::permute(ops::matmul(ops::causal_softmax(scores), heads(vv)), {0, 2, 1, 3}),
                                     {B, T, C});
    ops::sum(out2 * R).backward();
    CHECK(nan_pattern(out2.to_vector()) == nan_pattern(keep_p[0]));
    CHECK(nan_pattern(qq.grad().to_vector()) == nan_pattern(keep_p[1]));
    CHECK(nan_pattern(kk.grad().to_vector()) == nan_pattern(keep_p[2]));
    CHECK(nan_pattern(vv.grad().to_vector()) == nan_pattern(keep_p[3]));
  }
}

TEST_CASE("cross_entropy: a NaN logit makes the loss NaN, wherever it is in the row") {
  for (const V& row : {V{1, kNaN, 2}, V{kNaN, -kInf, -kInf}, V{-kInf, -kInf, kNaN}}) {
    Tensor x = leaf(row, {1, 3});
    Tensor loss = ops::cross_entropy(x, Tensor::from_ints({0}, {1}));
    CHECK(std::isnan(loss.item()));
    loss.backward();
    CHECK(all_nan(x.grad().to_vector()));
  }
}

// ---- precision of log-softmax and cross-entropy at large logits --------------------------------

TEST_CASE("log_softmax and cross_entropy keep their precision at large logits: (x - max) - log s") {
  // x - (max + log s) rounded log s to the spacing of max: -0.40625 for -0.40760596 in float32
  const double lse = std::log(1 + std::exp(-1.0) + std::exp(-2.0)); // 0.40760596
  for (const double big : {1e4, 1e5}) {
    CAPTURE(big);
    const Tensor x = Tensor::from({big, big - 1, big - 2}, {1, 3}, DType::f32);
    check_close(ops::log_softmax(x), {-lse, -1 - lse, -2 - lse}, 0, 1e-6);     // was off by 3.3e-3 at 1e5
    check_close(ops::log_softmax(ops::transpose(ops::reshape(x, {1, 3, 1}), 1, 2), 2), {-lse, -1 - lse, -2 - lse}, 0,
                1e-6);
    check_close(ops::log_softmax(ops::reshape(x, {3, 1}), 0), {-lse, -1 - lse, -2 - lse}, 0, 1e-6); // axis kernel
    check_close(ops::cross_entropy(x, Tensor::from_ints({1}, {1})), {1 + lse}, 0, 1e-6);
  }
  // cross-entropy around logits of 3000 (was 2.7e-4 off, above the differential test's 1e-4)
  const Tensor x = Tensor::from({3000.25, 2999.5, 2998.0}, {1, 3}, DType::f32);
  const double l = std::log(1 + std::exp(-0.75) + std::exp(-2.25));
  check_close(ops::cross_entropy(x, Tensor::from_ints({0}, {1})), {l}, 0, 1e-6);
}

// ---- attention scale ---------------------------------------------------------------------------

TEST_CASE("attention: a negative scale is used as given, 0 is the default, a non-finite one is refused") {
  const Tensor q = randn({1, 3, 4}, 1), k = randn({1, 5, 4}, 2), v = randn({1, 5, 4}, 3);
  auto reference = [&](double s) { // softmax(s Q K^T) V, one head
    return ops::matmul(ops::softmax(ops::matmul(q, ops::transpose(k, 1, 2), s)), v);
  };
  check_close(ops::attention(q, k, v, 1, {}, nullptr, -0.7), reference(-0.7).to_vector(), 1e-12); // was 1 / sqrt(4)
  check_close(ops::self_attention(ops::concat({q, q, q}, 2), 1, {}, nullptr, -0.7).to_vector(),
              ops::matmul(ops::softmax(ops::matmul(q, ops::transpose(q, 1, 2), -0.7)), q).to_vector(), 1e-12);
  check_close(ops::attention(q, k, v, 1), reference(0.5).to_vector(), 1e-12);
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::attention(q, k, v, 1, {}, nullptr, kNaN); }),
                 "attention: scale must be finite"));
  CHECK_THROWS_AS(ops::self_attention(ops::concat({q, q, q}, 2), 1, {}, nullptr, kInf), std::invalid_argument);
}

// ---- layer norm of rows whose squared deviations overflow --------------------------------------

TEST_CASE("layer_norm of a row whose squared deviations overflow is exact, not the bias") {
  // [1e20, 0, 1, 2]: mean 2.5e19, deviations up to 7.5e19, squares beyond float32 (3.4e38). PyTorch
  // gives NaN; the exact answer is xhat = [sqrt(3), -1/sqrt(3) x 3]. Was [0.5 x 4], zero gradient.
  const double r3 = std::sqrt(3.0);
  const V want = {r3 + 0.5, -1 / r3 + 0.5, -1 / r3 + 0.5, -1 / r3 + 0.5};
  for (DType d : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(d));
    const double big = d == DType::f32 ? 1e20 : 1e160;
    Tensor x = leaf({big, 0, 1, 2}, {1, 4}, d);
    Tensor b = leaf({0.5, 0.5, 0.5, 0.5}, {4}, d);
    Tensor y = ops::layer_norm(x, Tensor(), b);
    check_close(y, want, 0, 1e-6);
    // the gradient of sum(y * r): with r = xhat it is 0 on x (a layer norm's output is scale
    // free), and dxhat/dx ~ 1 / (4.3e19) per unit otherwise - finite, not the old zero
    y.backward(Tensor::from({1, 0, 0, 0}, {1, 4}, d));
    const V g = x.grad().to_vector();
    for (double gi : g) CHECK(std::isfinite(gi));
    CHECK(g[1] != 0);
    check_close(b.grad(), {1, 0, 0, 0}, 0);
    // add_layer_norm too, and without weight or bias
    Tensor z = ops::add_layer_norm(Tensor::from({big / 2, 0, 0.5, 1}, {1, 4}, d), Tensor::from({big / 2, 0, 0.5, 1}, {1, 4}, d),
                                   Tensor(), b.detach());
    check_close(z, want, 0, 1e-6);
  }
  // a row summing past the largest float: [3e38, 3e38] has mean 3e38 and variance 0 (PyTorch: NaN)
  check_close(ops::layer_norm(Tensor::from({3e38, 3e38}, {1, 2}, DType::f32), Tensor(), Tensor()), {0, 0}, 0);
  // a row holding inf or NaN is NaN, as in PyTorch
  CHECK(all_nan(ops::layer_norm(Tensor::from({kInf, 0, 1}, {1, 3}, DType::f32), Tensor(), Tensor()).to_vector()));
  CHECK(all_nan(ops::layer_norm(Tensor::from({kNaN, 0, 1}, {1, 3}, DType::f32), Tensor(), Tensor()).to_vector()));
}

// ---- var and std with a correction above N -----------------------------------------------------

TEST_CASE("var and std with correction > N: inf forward, PyTorch's finite gradient") {
  // torch 1.13: var(x, correction=4) of [0.4, 0.1, 0.3] is inf, its gradient 2 (x - mean) / (3 - 4)
  // = [-0.2667, 0.3333, -0.0667] (was +-inf); std's gradient is 0 (was NaN)
  Tensor x = leaf({0.4, 0.1, 0.3}, {3});
  Tensor v = ops::var(x, {0}, 4);
  CHECK(v.item() == kInf);
  v.backward();
  const double m = (0.4 + 0.1 + 0.3) / 3;
  check_close(x.grad(), {-2 * (0.4 - m), -2 * (0.1 - m), -2 * (0.3 - m)}, 1e-15);
  Tensor y = leaf({0.4, 0.1, 0.3}, {3});
  Tensor s = ops::std(y, {0}, 4);
  CHECK(s.item() == kInf);
  s.backward();
  check_same(y.grad(), {0, 0, 0});
  // correction 5: 2 / (3 - 5) = -1
  Tensor w = leaf({0.4, 0.1, 0.3}, {3});
  ops::var(w, {0}, 5).backward();
  check_close(w.grad(), {-(0.4 - m), -(0.1 - m), -(0.3 - m)}, 1e-15);
  // N = correction still divides by zero: inf, as PyTorch ([inf, -inf, inf])
  Tensor e = leaf({0.4, 0.1, 0.3}, {3});
  ops::var(e, {0}, 3).backward();
  check_same(e.grad(), {kInf, -kInf, kInf});
}

// ---- inputs PyTorch accepts --------------------------------------------------------------------

TEST_CASE("softmax and log_softmax of a 0-d tensor: 1 and 0 with zero gradient, as PyTorch") {
  Tensor x = leaf({2.0}, {});
  Tensor y = ops::softmax(x); // was refused
  CHECK(y.shape() == Dims{});
  CHECK(y.item() == 1.0);
  y.backward();
  CHECK(x.grad().item() == 0.0);
  CHECK(ops::log_softmax(x.detach(), -1).item() == 0.0);
  CHECK(ops::softmax(x.detach(), 0).item() == 1.0);
  CHECK(std::isnan(ops::softmax(Tensor::from({kNaN}, {}, DType::f64)).item()));
}

TEST_CASE("layer_norm and add_layer_norm over an empty last axis give an empty result, as PyTorch") {
  Tensor x = leaf({}, {3, 0}), w = leaf({}, {0}), b = leaf({}, {0});
  Tensor y = ops::layer_norm(x, w, b); // was refused
  CHECK(y.shape() == Dims{3, 0});
  ops::sum(y).backward();
  CHECK(x.grad().shape() == Dims{3, 0});
  CHECK(w.grad().shape() == Dims{0});
  CHECK(ops::add_layer_norm(x.detach(), x.detach(), Tensor(), Tensor()).shape() == Dims{3, 0});
}

TEST_CASE("add_layer_norm without weight or bias, as layer_norm") {
  const Tensor a = randn({2, 5}, 1), c = randn({2, 5}, 2), w = randn({5}, 3), b = randn({5}, 4);
  for (int which = 1; which < 4; ++which) { // no weight, no bias, neither (each was refused)
    const Tensor ww = which & 1 ? Tensor() : w, bb = which & 2 ? Tensor() : b;
    check_close(ops::add_layer_norm(a, c, ww, bb), ops::layer_norm(a + c, ww, bb).to_vector(), 1e-12);
  }
  Tensor x = leaf(a.to_vector(), {2, 5}), y = leaf(c.to_vector(), {2, 5});
  ops::sum(ops::add_layer_norm(x, y, Tensor(), Tensor()) * randn({2, 5}, 5)).backward();
  Tensor s = leaf((a + c).to_vector(), {2, 5});
  ops::sum(ops::layer_norm(s, Tensor(), Tensor()) * randn({2, 5}, 5)).backward();
  check_close(x.grad(), s.grad().to_vector(), 1e-12);
  check_close(y.grad(), s.grad().to_vector(), 1e-12);
}

TEST_CASE("valid_lens above Tk keep every key (d2l's sequence_mask), in masked_softmax and attention") {
  const Tensor x = randn({2, 3, 4}, 1);
  check_close(ops::masked_softmax(x, Tensor::from_ints({7, 2}, {2})),                 // was refused
              ops::masked_softmax(x, Tensor::from_ints({4, 2}, {2})).to_vector(), 0);
  const Tensor q = randn({2, 3, 4}, 2), k = randn({2, 5, 4}, 3), v = randn({2, 5, 4}, 4);
  ops::AttentionMask longer, exact;
  longer.valid_lens = Tensor::from_ints({9, 3}, {2});
  exact.valid_lens = Tensor::from_ints({5, 3}, {2});
  check_close(ops::attention(q, k, v, 2, longer), ops::attention(q, k, v, 2, exact).to_vector(), 0);
}

TEST_CASE("gather with an index smaller than x off the axis reads the leading part, as PyTorch") {
  // torch.gather(arange(12).view(3, 4), 1, [[0, 1], [2, 3]]) = [[0, 1], [6, 7]], gradient into those
  Tensor x = leaf({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor y = ops::gather(x, 1, Tensor::from_ints({0, 1, 2, 3}, {2, 2})); // was refused
  check_same(y, {0, 1, 6, 7});
  ops::sum(y).backward();
  check_same(x.grad(), {1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0});
  CHECK_THROWS_AS(ops::gather(x.detach(), 1, Tensor::from_ints({0, 0, 0, 0}, {4, 1})), std::invalid_argument);
}

TEST_CASE("index_select of a 0-d tensor, and with a 0-d index, as PyTorch") {
  Tensor x = leaf({3.0}, {});
  Tensor y = ops::index_select(x, 0, Tensor::from_ints({0}, {1})); // was refused (axis out of range)
  CHECK(y.shape() == Dims{});
  CHECK(y.item() == 3.0);
  y.backward();
  CHECK(x.grad().item() == 1.0);
  CHECK(ops::index_select(x.detach(), -1, Tensor::from_ints({0}, {})).item() == 3.0);
  // PyTorch reads an undefined element for an empty index of a 0-d tensor: refused
  CHECK_THROWS_AS(ops::index_select(x.detach(), 0, Tensor::from_ints({}, {0})), std::invalid_argument);
  CHECK_THROWS_AS(ops::index_select(x.detach(), 0, Tensor::from_ints({1}, {1})), std::invalid_argument);
  // a 0-d index keeps the axis with size 1: [2, 1], as torch.index_select(x, 1, tensor(1))
  const Tensor m = Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  const Tensor s = ops::index_select(m, 1, Tensor::from_ints({1}, {}));
  CHECK(s.shape() == Dims{2, 1});
  check_same(s, {2, 5});
}

TEST_CASE("float32 with a 0-d float64 computes in float32, as PyTorch; the scalar's gradient is float64") {
  Tensor a = leaf({1, 2}, {2}, DType::f32);
  Tensor s = leaf({2.0}, {}, DType::f64);
  Tensor y = a * s; // was refused
  CHECK(y.dtype() == DType::f32);
  check_same(y, {2, 4});
  ops::sum(y).backward();
  check_same(a.grad(), {2, 2});
  CHECK(s.grad().dtype() == DType::f64);
  CHECK(s.grad().item() == 3.0);
  for (const Tensor& r : {a.detach() + s.detach(), s.detach() - a.detach(), a.detach() / s.detach(),
                          ops::pow(a.detach(), s.detach()),
                          ops::where(Tensor::from({1, 0}, {2}, DType::bool8), a.detach(), s.detach())})
    CHECK(r.dtype() == DType::f32);
  // still refused: both dimensioned, or both 0-d (PyTorch would give float64)
  CHECK_THROWS_AS(a.detach() + Tensor::from({1, 2}, {2}, DType::f64), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::from({1}, {}, DType::f32) + s.detach(), std::invalid_argument);
}

// ---- documented differences (framework/ops/DERIVATIVES.md) -------------------------------------

TEST_CASE("documented difference: the flash path skips masked keys past every kept prefix, NaN ones too") {
  // Causal, T = 384: the last key is masked for every query but the last. A NaN in its value
  // reaches every query's output through 0 * NaN on the keep-P path (as in PyTorch's matmul);
  // the flash tiles of the first queries never reach that key, so their rows stay finite.
  const std::int64_t T = 384, C = 4;
  REQUIRE(kernels::flash_attention_pays(T, T, C));
  Tensor q = randn({1, T, C}, 1), k = randn({1, T, C}, 2), v = randn({1, T, C}, 3);
  v.data<double>()[(T - 1) * C] = kNaN;
  ops::AttentionMask m;
  m.causal = true;
  Tensor w;
  const V keep_p = ops::attention(q, k, v, 1, m, &w).to_vector(), flash = ops::attention(q, k, v, 1, m).to_vector();
  CHECK(std::isnan(keep_p[0]));      // query 0: weight 0 on the NaN value, 0 * NaN
  CHECK(std::isfinite(flash[0]));    // flash: not read
  CHECK(std::isnan(flash[(T - 1) * C])); // the last query keeps it: NaN on both paths
  CHECK(std::isnan(keep_p[(T - 1) * C]));
}

TEST_CASE("documented difference: a cross_entropy position with weight 0 is not read, NaN logits included") {
  Tensor x = leaf({kNaN, 1, 2, 1, 2, 3}, {2, 3});
  ops::CrossEntropyOptions o;
  o.reduction = ops::Reduction::sum;
  Tensor loss = ops::cross_entropy(x, Tensor::from_ints({-100, 1}, {2}), o); // position 0 ignored
  CHECK(std::isfinite(loss.item()));
  loss.backward();
  const V g = x.grad().to_vector();
  CHECK(g[0] == 0); // PyTorch: NaN (log_softmax's backward, 0 - NaN * 0)
  CHECK(g[1] == 0);
  CHECK(g[2] == 0);
  CHECK(std::isfinite(g[4]));
}
