// framework/optim: SGD (plain, momentum, weight decay), Adam and AdamW against hand-computed
// updates over three steps (PyTorch's rules, see optimizer.hpp), skipped parameters, global-norm
// clipping, the learning-rate schedule, and the state() / io::restore_optimizer_state round trip with
// its refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/io/restore.hpp"
#include "framework/optim/optimizer.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace headgrad::optim;
using test_support::check_close;
using test_support::contains;
using test_support::error_of;
using test_support::starts_with;

namespace {

// A float64 leaf parameter with the given values.
Tensor param(const std::vector<double>& v) {
  Tensor t = Tensor::from(v, {static_cast<std::int64_t>(v.size())}, DType::f64);
  t.set_requires_grad(true);
  return t;
}

// Sets p.grad to `g` (what a backward would have accumulated).
void set_grad(const Tensor& p, const std::vector<double>& g) {
  p.impl()->grad = Tensor::from(g, p.shape(), p.dtype()).impl_ptr();
}

// The three gradients every test feeds, and the starting values.
const std::vector<double> kP0 = {1.0, -2.0};
const std::vector<std::vector<double>> kGrads = {{0.5, -1.0}, {0.1, 0.3}, {-0.2, 0.4}};

// Runs the optimizer for the three gradients and returns the parameter after each step.
template <typename Opt, typename Options> std::vector<std::vector<double>> run3(Options o) {
  Tensor p = param(kP0);
  Opt opt({{"w", p}}, o);
  std::vector<std::vector<double>> out;
  for (const auto& g : kGrads) {
    set_grad(p, g);
    opt.step();
    out.push_back(p.to_vector());
  }
  CHECK(opt.steps() == 3);
  return out;
}

// The parameter after each of the three steps, each value within relative `eps` of the wanted one.
void check_steps(const std::vector<std::vector<double>>& ps, const std::vector<std::vector<double>>& want, double eps) {
  for (int s = 0; s < 3; ++s) {
    CAPTURE(s);
    for (int i = 0; i < 2; ++i) CHECK(ps[s][i] == doctest::Approx(want[s][i]).epsilon(eps));
  }
}

} // namespace

TEST_CASE("SGD plain: p -= lr * g, three steps by hand") {
  // lr 0.1: w0 = 1 - 0.05 = 0.95 -> 0.94 -> 0.96; w1 = -2 + 0.1 = -1.9 -> -1.93 -> -1.97
  const auto ps = run3<SGD>(SGDOptions{0.1, 0.0, 0.0});
  const std::vector<std::vector<double>> want = {{0.95, -1.9}, {0.94, -1.93}, {0.96, -1.97}};
  check_steps(ps, want, 1e-14);
}

TEST_CASE("SGD momentum: buffer = grad at step 1, then mu * buf + g") {
  // lr 0.1, mu 0.9
  // step 1: buf = g1 = (0.5, -1)          p = (0.95, -1.9)
  // step 2: buf = 0.9 buf + g2 = (0.55, -0.6)   p = (0.895, -1.84)
  // step 3: buf = 0.9 buf + g3 = (0.295, -0.14) p = (0.8655, -1.826)
  const auto ps = run3<SGD>(SGDOptions{0.1, 0.9, 0.0});
  const std::vector<std::vector<double>> want = {{0.95, -1.9}, {0.895, -1.84}, {0.8655, -1.826}};
  check_steps(ps, want, 1e-14);
}

TEST_CASE("SGD momentum + weight decay: g = grad + wd * p before the buffer") {
  // lr 0.1, mu 0.9, wd 0.1
  // step 1: d = (0.5 + 0.1, -1 - 0.2) = (0.6, -1.2); buf = d; p = (0.94, -1.88)
  // step 2: d = (0.1 + 0.094, 0.3 - 0.188) = (0.194, 0.112); buf = (0.734, -0.968); p = (0.8666, -1.7832)
  // step 3: d = (-0.2 + 0.08666, 0.4 - 0.17832) = (-0.11334, 0.22168);
  //         buf = (0.6606 - 0.11334, -0.8712 + 0.22168) = (0.54726, -0.64952); p = (0.811874, -1.718248)
  const auto ps = run3<SGD>(SGDOptions{0.1, 0.9, 0.1});
  const std::vector<std::vector<double>> want = {{0.94, -1.88}, {0.8666, -1.7832}, {0.811874, -1.718248}};
  check_steps(ps, want, 1e-13);
}

namespace {
// PyTorch's Adam/AdamW for one scalar, written out independently of the implementation.
std::vector<std::vector<double>> adam_reference(double lr, double wd, bool decoupled) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  std::vector<double> p = kP0, m(2, 0.0), v(2, 0.0);
  std::vector<std::vector<double>> out;
  for (int t = 1; t <= 3; ++t) {
    for (int i = 0; i < 2; ++i) {
      double g = kGrads[static_cast<std::size_t>(t - 1)][static_cast<std::size_t>(i)];
      if (decoupled) p[i] *= 1 - lr * wd;
      else g += wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps; // eps after the bias correction
      p[i] -= lr / bc1 * m[i] / denom;
    }
    out.push_back(p);
  }
  return out;
}
} // namespace

TEST_CASE("Adam: three steps against the written-out rule") {
  // Step 1 by hand: m = 0.1 g, v = 0.001 g^2, mhat = g, vhat = g^2, so p -= lr * g / (|g| + eps):
  // a step of lr * sign(g) (minus a 1e-8 relative nudge).
  const auto ps = run3<Adam>(AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.0, false});
  CHECK(ps[0][0] == doctest::Approx(1.0 - 0.01 * 0.5 / (0.5 + 1e-8)).epsilon(1e-14));
  CHECK(ps[0][1] == doctest::Approx(-2.0 + 0.01 * 1.0 / (1.0 + 1e-8)).epsilon(1e-14));
  const auto want = adam_reference(0.01, 0.0, false);
  check_steps(ps, want, 1e-13);
  // Pinned step-3 values (computed once from the rule above with Python floats).
  CHECK(ps[2][0] == doctest::Approx(0.9785260531835489).epsilon(1e-12));
  CHECK(ps[2][1] == doctest::Approx(-1.9849209238476584).epsilon(1e-12));
}

TEST_CASE("Adam with weight decay: L2 folded into the gradient") {
  const auto ps = run3<Adam>(AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.1, false});
  const auto want = adam_reference(0.01, 0.1, false);
  check_steps(ps, want, 1e-13);
  // differs from plain Adam (the decay changed the gradient)
  const auto plain = adam_reference(0.01, 0.0, false);
  CHECK(std::abs(ps[2][0] - plain[2][0]) > 1e-6);
}

TEST_CASE("AdamW: p *= 1 - lr * wd, then Adam without weight decay") {
  const auto ps = run3<Adam>(AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.1, true});
  // step 1 by hand: w0 = 1 * (1 - 0.001) - 0.01 * 0.5 / (0.5 + 1e-8)
  CHECK(ps[0][0] == doctest::Approx(0.999 - 0.01 * 0.5 / (0.5 + 1e-8)).epsilon(1e-14));
  const auto want = adam_reference(0.01, 0.1, true);
  check_steps(ps, want, 1e-13);
  const auto l2 = adam_reference(0.01, 0.1, false);
  CHECK(std::abs(ps[2][1] - l2[2][1]) > 1e-6); // decoupled is not the same as L2
}

TEST_CASE("float32 parameters take the same update to float precision") {
  Tensor p = Tensor::from(kP0, {2}, DType::f32);
  p.set_requires_grad(true);
  Adam opt({{"w", p}}, AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.0, false});
  for (const auto& g : kGrads) {
    set_grad(p, g);
    opt.step();
  }
  check_close(p, adam_reference(0.01, 0.0, false)[2], 1e-6);
}

TEST_CASE("parameters without a gradient are skipped") {
  for (int which = 0; which < 3; ++which) {
    CAPTURE(which);
    Tensor a = param({1.0, 2.0}), b = param({3.0, 4.0});
    std::unique_ptr<Optimizer> opt;
    if (which == 0) opt = std::make_unique<SGD>(nn::NamedTensors{{"a", a}, {"b", b}}, SGDOptions{0.1, 0.9, 0.1});
    if (which == 1) opt = std::make_unique<Adam>(nn::NamedTensors{{"a", a}, {"b", b}}, AdamOptions{0.1, 0.9, 0.999, 1e-8, 0.1, false});
    if (which == 2) opt = std::make_unique<Adam>(nn::NamedTensors{{"a", a}, {"b", b}}, AdamOptions{0.1, 0.9, 0.999, 1e-8, 0.1, true});
    set_grad(a, {1.0, 1.0});
    opt->step();
    opt->step();
    CHECK(b.to_vector() == std::vector<double>{3.0, 4.0}); // no grad: untouched, even by weight decay
    CHECK(a.to_vector() != std::vector<double>{1.0, 2.0});
    for (const auto& [name, t] : opt->state())
      if (!starts_with(name, "step") && contains(name, ".b")) CHECK(t.to_vector() == std::vector<double>{0.0, 0.0});
    CHECK(opt->param_steps(1) == 0); // and its own step count did not advance (PyTorch's state['step'])
    // zero_grad drops the gradients: a further step changes nothing
    opt->zero_grad();
    CHECK_FALSE(a.grad().defined());
    const auto before = a.to_vector();
    opt->step();
    CHECK(a.to_vector() == before);
  }
}

TEST_CASE("set_lr takes effect on the next step") {
  Tensor p = param({0.0});
  SGD opt({{"w", p}}, SGDOptions{0.1, 0.0, 0.0});
  CHECK(opt.lr() == 0.1);
  opt.set_lr(0.5);
  set_grad(p, {1.0});
  opt.step();
  CHECK(p.to_vector()[0] == doctest::Approx(-0.5));
}

TEST_CASE("clip_grad_norm") {
  SUBCASE("above the bound: scales all gradients together, returns the pre-clip norm") {
    Tensor a = param({0, 0}), b = param({0});
    set_grad(a, {3.0, 0.0});
    set_grad(b, {4.0}); // global norm 5
    const double n = clip_grad_norm({a, b}, 1.0);
    CHECK(n == doctest::Approx(5.0).epsilon(1e-15));
    const double s = 1.0 / (5.0 + 1e-6); // PyTorch's max_norm / (norm + 1e-6)
    check_close(a.grad(), {3.0 * s, 0.0}, 1e-15);
    check_close(b.grad(), {4.0 * s}, 1e-15);
    // the clipped norm is max_norm (to the 1e-6 term)
    CHECK(clip_grad_norm({a, b}, 10.0) == doctest::Approx(1.0).epsilon(1e-6));
  }
  SUBCASE("below the bound: gradients are left alone") {
    Tensor a = param({0, 0});
    set_grad(a, {0.3, 0.4});
    CHECK(clip_grad_norm({a}, 1.0) == doctest::Approx(0.5).epsilon(1e-15));
    CHECK(a.grad().to_vector() == std::vector<double>{0.3, 0.4});
  }
  SUBCASE("parameters without grad are ignored") {
    Tensor a = param({0, 0}), b = param({0});
    set_grad(a, {3.0, 4.0});
    CHECK(clip_grad_norm({a, b}, 100.0) == doctest::Approx(5.0));
    CHECK_FALSE(b.grad().defined());
  }
  SUBCASE("a NaN norm makes every gradient NaN, an infinite one zeroes the finite entries (PyTorch)") {
    // torch.nn.utils.clip_grad_norm_ multiplies by clamp(max_norm / (norm + 1e-6), max=1): NaN, or 0
    Tensor a = param({0, 0}), b = param({0});
    set_grad(a, {std::numeric_limits<double>::quiet_NaN(), 1.0});
    set_grad(b, {2.0});
    CHECK(std::isnan(clip_grad_norm({a, b}, 1.0)));
    CHECK(std::isnan(a.grad().to_vector()[1])); // was left at 1
    CHECK(std::isnan(b.grad().to_vector()[0]));
    set_grad(a, {std::numeric_limits<double>::infinity(), 1.0});
    set_grad(b, {2.0});
    CHECK(std::isinf(clip_grad_norm({a, b}, 1.0)));
    CHECK(std::isnan(a.grad().to_vector()[0])); // inf * 0
    CHECK(a.grad().to_vector()[1] == 0.0);      // was left at 1
    CHECK(b.grad().to_vector()[0] == 0.0);
  }
  SUBCASE("a norm within 1e-6 below max_norm is scaled too, as PyTorch always multiplies") {
    Tensor a = param({0, 0});
    set_grad(a, {0.6, 0.8 * (1 - 5e-7)}); // norm 0.99999968
    const double n = clip_grad_norm({a}, 1.0);
    const double s = 1.0 / (n + 1e-6);  // 0.99999932 < 1: PyTorch gives [0.59999959, 0.79999906]
    CHECK(s < 1);
    check_close(a.grad(), {0.6 * s, 0.8 * (1 - 5e-7) * s}, 1e-15); // was left as it was (n <= max_norm)
  }
  SUBCASE("max_norm must be >= 0") {
    Tensor a = param({0});
    set_grad(a, {1.0});
    CHECK_THROWS_AS(clip_grad_norm({a}, -1.0), std::invalid_argument);
    CHECK_THROWS_AS(clip_grad_norm({a}, std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
    CHECK(clip_grad_norm({a}, 0.0) == 1.0); // max_norm 0: every gradient 0, as PyTorch
    CHECK(a.grad().to_vector()[0] == 0.0);
  }
  SUBCASE("the norm is accumulated in double: float32 gradients whose float32 sum of squares overflows") {
    // PyTorch's float32 norm of these is inf, and its factor 0 would zero them; the norm in double
    // is 5e20 and they are scaled to norm 1
    Tensor a = Tensor::zeros({2}, DType::f32);
    a.set_requires_grad(true);
    a.impl()->grad = Tensor::from({3e20, 4e20}, {2}, DType::f32).impl_ptr();
    CHECK(clip_grad_norm({a}, 1.0) == doctest::Approx(5e20).epsilon(1e-6));
    check_close(a.grad(), {0.6, 0.8}, 1e-6);
  }
}

// step_scaled(c) against clip_grad_norm's in-place scaling then step(): the same parameters and
// state to the bit, the gradients left as they were.
template <typename Opt, typename Options> void check_step_scaled(Options o, DType dtype) {
  const std::vector<double> p0 = {1.0, -2.0, 0.25, 3.0}, g = {0.7, -1.9, 2.3, 0.01};
  auto leaf = [&] {
    Tensor t = Tensor::from(p0, {4}, dtype);
    t.set_requires_grad(true);
    return t;
  };
  Tensor a = leaf(), b = leaf();
  Opt clipped({{"w", a}}, o), folded({{"w", b}}, o);
  for (int step = 0; step < 3; ++step) {
    set_grad(a, g);
    set_grad(b, g);
    const double norm = clip_grad_norm({a}, 1.0); // in place: a's gradient times the coefficient
    clipped.step();
    folded.step_scaled(clip_coefficient(1.0, norm));
    CHECK(a.to_vector() == b.to_vector());
    CHECK(b.grad().to_vector() == Tensor::from(g, {4}, dtype).to_vector()); // not scaled in place
  }
  const nn::NamedTensors sa = clipped.state(), sb = folded.state();
  REQUIRE(sa.size() == sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) CHECK(sa[i].second.to_vector() == sb[i].second.to_vector());
  folded.step(); // and a plain step() after it reads the gradients unscaled again
  clipped.step_scaled(1.0);
  CHECK(a.to_vector() != b.to_vector()); // (b stepped with g, a with its clipped gradient)
}

TEST_CASE("Optimizer::step_scaled has the bits of clipping in place and then stepping") {
  for (DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    check_step_scaled<Adam>(AdamOptions{.lr = 0.1, .weight_decay = 0.01}, dtype);
    check_step_scaled<Adam>(AdamOptions{.lr = 0.1, .weight_decay = 0.1, .decoupled = true, .amsgrad = true,
                                        .maximize = true},
                            dtype);
    check_step_scaled<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true,
                                      .maximize = true},
                           dtype);
  }
}

TEST_CASE("LrSchedule: warmup, constant, cosine") {
  const LrSchedule c{2.0, 4, 100, false};
  CHECK(c.at(1) == doctest::Approx(0.5));
  CHECK(c.at(2) == doctest::Approx(1.0));
  CHECK(c.at(4) == doctest::Approx(2.0));
  CHECK(c.at(5) == 2.0);
  CHECK(c.at(100) == 2.0);
  CHECK(c.at(1000) == 2.0);

  const LrSchedule cos{1.0, 10, 110, true};
  CHECK(cos.at(5) == doctest::Approx(0.5));
  CHECK(cos.at(10) == doctest::Approx(1.0));
  CHECK(cos.at(35) == doctest::Approx(0.5 * (1 + std::cos(M_PI * 0.25))));
  CHECK(cos.at(60) == doctest::Approx(0.5));
  CHECK(cos.at(110) == doctest::Approx(0.0).epsilon(1e-12));
  CHECK(cos.at(500) == doctest::Approx(0.0).epsilon(1e-12)); // stays at 0 beyond total
  for (std::int64_t s = 11; s < 110; ++s) CHECK(cos.at(s + 1) <= cos.at(s)); // monotone decay

  const LrSchedule none{0.3, 0, 10, false};
  CHECK(none.at(1) == 0.3); // no warmup: the base rate from step 1
  const LrSchedule cos0{1.0, 0, 4, true};
  CHECK(cos0.at(2) == doctest::Approx(0.5));
}

TEST_CASE("state() / restore_optimizer_state round trip continues exactly") {
  auto make = [](Tensor& p, bool adam) -> std::unique_ptr<Optimizer> {
    if (adam) return std::make_unique<Adam>(nn::NamedTensors{{"w", p}}, AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.0, false});
    return std::make_unique<SGD>(nn::NamedTensors{{"w", p}}, SGDOptions{0.1, 0.9, 0.01});
  };
  for (bool adam : {true, false}) {
    CAPTURE(adam);
    Tensor p = param(kP0);
    auto opt = make(p, adam);
    set_grad(p, kGrads[0]);
    opt->step();
    set_grad(p, kGrads[1]);
    opt->step();
    const auto st = opt->state();
    REQUIRE(st.size() == (adam ? 3u : 2u));
    CHECK(st[0].first == "step");
    CHECK(st[0].second.dtype() == DType::i64);
    CHECK(st[0].second.to_int_vector() == std::vector<std::int64_t>{2});
    CHECK(st[1].first == (adam ? "exp_avg.w" : "momentum_buffer.w"));
    if (adam) CHECK(st[2].first == "exp_avg_sq.w");

    // a fresh optimizer on a copy of the parameter, given the state (deep copies, as from a file)
    Tensor q = param(p.to_vector());
    auto opt2 = make(q, adam);
    nn::NamedTensors copy;
    for (const auto& [n, t] : st) copy.emplace_back(n, t.clone());
    io::restore_optimizer_state(*opt2, copy, "state.st");
    CHECK(opt2->steps() == 2);
    set_grad(p, kGrads[2]);
    set_grad(q, kGrads[2]);
    opt->step();
    opt2->step();
    CHECK(p.to_vector() == q.to_vector()); // bit-identical continuation
  }
}

TEST_CASE("restore_optimizer_state refusals name the source and the entry, and change nothing") {
  Tensor p = param(kP0);
  Adam opt({{"w", p}}, AdamOptions{});
  set_grad(p, kGrads[0]);
  opt.step();
  const auto good = opt.state();
  auto snapshot = [&] {
    std::vector<std::vector<double>> s;
    for (const auto& [n, t] : opt.state()) s.push_back(t.to_vector());
    return s;
  };
  const auto before = snapshot();

  SUBCASE("missing entry") {
    nn::NamedTensors st = {good[0], {"exp_avg.w", Tensor::zeros({2}, DType::f64)}}; // no exp_avg_sq.w
    const std::string msg = error_of<std::invalid_argument>([&] { io::restore_optimizer_state(opt, st, "opt.st"); });
    CHECK(contains(msg, "opt.st: "));
    CHECK(contains(msg, "'exp_avg_sq.w'"));
    CHECK(contains(msg, "missing"));
    CHECK(snapshot() == before); // exp_avg.w was not overwritten with zeros
    CHECK(opt.steps() == 1);
  }
  SUBCASE("missing step") {
    nn::NamedTensors st(good.begin() + 1, good.end());
    const std::string msg = error_of<std::invalid_argument>([&] { io::restore_optimizer_state(opt, st, "opt.st"); });
    CHECK(contains(msg, "opt.st: "));
    CHECK(contains(msg, "'step'"));
  }
  SUBCASE("wrong shape") {
    nn::NamedTensors st = {{"step", Tensor::from_ints({7}, {})},
                           {"exp_avg.w", Tensor::zeros({2}, DType::f64)},
                           {"exp_avg_sq.w", Tensor::zeros({3}, DType::f64)}};
    const std::string msg = error_of<std::invalid_argument>([&] { io::restore_optimizer_state(opt, st, "opt.st"); });
    CHECK(contains(msg, "opt.st: "));
    CHECK(contains(msg, "'exp_avg_sq.w'"));
    CHECK(contains(msg, "[3]"));
    CHECK(contains(msg, "[2]"));
    CHECK(snapshot() == before);
    CHECK(opt.steps() == 1);
  }
  SUBCASE("wrong dtype") {
    nn::NamedTensors st = {good[0], {"exp_avg.w", Tensor::zeros({2}, DType::f32)}, good[2]};
    const std::string msg = error_of<std::invalid_argument>([&] { io::restore_optimizer_state(opt, st, "opt.st"); });
    CHECK(contains(msg, "'exp_avg.w'"));
    CHECK(snapshot() == before);
  }
  SUBCASE("SGD state given to Adam") {
    Tensor q = param(kP0);
    SGD sgd({{"w", q}}, SGDOptions{0.1, 0.9, 0.0});
    const std::string msg =
        error_of<std::invalid_argument>([&] { io::restore_optimizer_state(opt, sgd.state(), "sgd.st"); });
    CHECK(contains(msg, "sgd.st: "));
    CHECK(contains(msg, "'exp_avg.w'"));
  }
}
