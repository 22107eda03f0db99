// test_linear_gelu.cpp - ops::linear_gelu (framework/ops/linear.cpp) against the two ops it fuses,
// its use by nn::Sequential and GPT's MLP, and the profile of its parts.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/nn/layers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/engine/profiler.hpp"
#include "models/gpt.hpp"
#include "tests/test_support.hpp"
#include "tests/tiny_models.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::node_names;
using test_support::randn;

namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

struct Grads {
  std::vector<double> y, dx, dw, db;
};

// y = f(x, w, b) and the gradients of sum(y * r).
template <typename F> Grads run(F f, DType dtype, bool with_bias) {
  Tensor x = randn({3, 5, 7}, 1, dtype), w = randn({9, 7}, 2, dtype), b = with_bias ? randn({9}, 3, dtype) : Tensor();
  const Tensor r = randn({3, 5, 9}, 4, dtype);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  if (with_bias) b.set_requires_grad(true);
  const Tensor y = f(x, w, b);
  ops::sum(y * r).backward();
  return {y.to_vector(), x.grad().to_vector(), w.grad().to_vector(),
          with_bias ? b.grad().to_vector() : std::vector<double>{}};
}

} // namespace

TEST_CASE_TEMPLATE("linear_gelu: gelu(linear(x, W, b)) in both forms, values and gradients", T, float, double) {
  const DType dtype = sizeof(T) == 4 ? DType::f32 : DType::f64;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  for (auto form : {ops::GeluApproximate::none, ops::GeluApproximate::tanh})
    for (bool with_bias : {true, false}) {
      INFO((form == ops::GeluApproximate::tanh ? "tanh" : "erf"), (with_bias ? ", bias" : ", no bias"));
      const Grads fused =
          run([&](const Tensor& x, const Tensor& w, const Tensor& b) { return ops::linear_gelu(x, w, b, form); }, dtype,
              with_bias);
      const Grads steps =
          run([&](const Tensor& x, const Tensor& w, const Tensor& b) { return ops::gelu(ops::linear(x, w, b), form); },
              dtype, with_bias);
      check_close(fused.y, steps.y, tol);
      check_close(fused.dx, steps.dx, tol);
      check_close(fused.dw, steps.dw, tol);
      check_close(fused.db, steps.db, tol);
    }
}

TEST_CASE("linear_gelu: one node, which keeps gelu' only when a gradient is wanted") {
  Tensor x = randn({4, 3}, 5), w = randn({6, 3}, 6);
  w.set_requires_grad(true);
  const Tensor y = ops::linear_gelu(x, w);
  CHECK(node_names(y) == std::vector<std::string>{"linear_gelu"});
  {
    NoGradGuard ng;
    const Tensor z = ops::linear_gelu(x, w);
    CHECK_FALSE(z.requires_grad());
    check_close(z, y.to_vector(), 0);
  }
  // a transposed (non-contiguous) input and a 1-D one
  const Tensor xt = randn({3, 4}, 7).transpose(0, 1);
  check_close(ops::linear_gelu(xt, w), ops::gelu(ops::linear(xt, w)).to_vector(), 1e-14);
  check_close(ops::linear_gelu(randn({3}, 8), w), ops::gelu(ops::linear(randn({3}, 8), w)).to_vector(), 1e-14);
}

TEST_CASE("linear_gelu: the profile charges the GELU pass to gelu and the gemms to linear_gelu") {
  profiler_reset();
  profiler_enable(true);
  Tensor x = randn({64, 32}, 9, DType::f32), w = randn({128, 32}, 10, DType::f32);
  w.set_requires_grad(true);
  ops::sum(ops::linear_gelu(x, w)).backward();
  profiler_enable(false);
  bool seen_fused = false, seen_gelu = false;
  for (const OpProfile& p : profiler_report()) {
    const std::string name = p.name;
    if (name == "linear_gelu") {
      seen_fused = true;
      CHECK(p.forward_calls == 1);
      CHECK(p.backward_calls == 1);
      CHECK(p.forward_seconds >= 0);
      CHECK(p.backward_seconds >= 0);
    }
    if (name == "gelu") {
      seen_gelu = true;
      CHECK(p.forward_calls == 1);  // the pass inside linear_gelu's forward
      CHECK(p.backward_calls == 1); // dz = dy gelu'(z) in its backward
      CHECK(p.forward_seconds > 0);
    }
  }
  CHECK(seen_fused);
  CHECK(seen_gelu);
  profiler_reset();
}

TEST_CASE("Sequential: Linear then GELU (or ReLU) modules run as one fused op, with the same results") {
  Generator g(11);
  auto fc = std::make_shared<nn::Linear>(4, 6, true, g, DType::f64);
  auto proj = std::make_shared<nn::Linear>(6, 3, true, g, DType::f64);
  auto fc2 = std::make_shared<nn::Linear>(3, 5, false, g, DType::f64);
  nn::Sequential seq(fc, std::make_shared<nn::GELU>(ops::GeluApproximate::tanh), proj, std::make_shared<nn::ReLU>(),
                     fc2, std::make_shared<nn::GELU>());
  const Tensor x = randn({2, 3, 4}, 12);
  const Tensor y = seq.forward(x);
  const std::vector<std::string> names = node_names(y);
  CHECK(has(names, "linear_gelu"));
  CHECK(has(names, "linear_relu"));
  CHECK_FALSE(has(names, "linear"));
  CHECK_FALSE(has(names, "gelu"));
  ops::sum(y).backward();
  const std::vector<double> fused_grads = test_support::gradients_of(seq);
  seq.zero_grad();
  // the steps one by one
  const Tensor h = ops::relu(proj->forward(ops::gelu(fc->forward(x), ops::GeluApproximate::tanh)));
  const Tensor want = ops::gelu(fc2->forward(h));
  check_close(y, want.to_vector(), 1e-14);
  ops::sum(want).backward();
  check_close(fused_grads, test_support::gradients_of(seq), 1e-13);
  // a GELU after something else, or a Linear last, stays as it is
  nn::Sequential plain(std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(4, 2, true, g, DType::f64));
  Tensor leaf = randn({3, 4}, 13);
  leaf.set_requires_grad(true);
  const std::vector<std::string> plain_names = node_names(plain.forward(leaf));
  CHECK(has(plain_names, "gelu"));
  CHECK(has(plain_names, "linear"));
}

TEST_CASE("GPT's MLP runs c_fc and its GELU as linear_gelu") {
  const models::GPTConfig cfg =
      tiny::gpt({.vocab = 11, .d_model = 8, .heads = 2, .layers = 1, .ffn = 16}, /*block_size=*/8);
  models::GPT gpt(cfg, 3, DType::f64);
  const Tensor tokens = Tensor::from_ints({1, 2, 3, 4, 5, 6}, {2, 3});
  const std::vector<std::string> names = node_names(gpt.forward(tokens, Tensor()));
  CHECK(has(names, "linear_gelu"));
  CHECK_FALSE(has(names, "gelu"));
}
