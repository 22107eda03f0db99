// test_linear_residual.cpp - ops::linear_residual (framework/ops/linear.cpp) against the add and
// the linear it fuses, its errors, and its use by GPT's blocks: fused when the dropout between
// projection and add is the identity, two ops when it is not, the same numbers either way.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "models/gpt.hpp"
#include "tests/test_support.hpp"
#include "tests/tiny_models.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::node_names;
using test_support::contains;
using test_support::error_of;
using test_support::randn;

namespace {

std::int64_t count(const std::vector<std::string>& v, const std::string& s) {
  return std::count(v.begin(), v.end(), s);
}

struct Grads {
  std::vector<double> y, dx, dw, db, dr;
};

// y = f(x, w, b, r) and the gradients of sum(y * g).
template <typename F> Grads run(F f, DType dtype, bool with_bias) {
  Tensor x = randn({3, 5, 7}, 1, dtype), w = randn({9, 7}, 2, dtype), b = with_bias ? randn({9}, 3, dtype) : Tensor();
  Tensor r = randn({3, 5, 9}, 4, dtype);
  const Tensor g = randn({3, 5, 9}, 5, dtype);
  for (Tensor* t : {&x, &w, &r}) t->set_requires_grad(true);
  if (with_bias) b.set_requires_grad(true);
  const Tensor y = f(x, w, b, r);
  ops::sum(y * g).backward();
  return {y.to_vector(), x.grad().to_vector(), w.grad().to_vector(),
          with_bias ? b.grad().to_vector() : std::vector<double>{}, r.grad().to_vector()};
}

} // namespace

TEST_CASE_TEMPLATE("linear_residual: r + linear(x, W, b), values and every gradient", T, float, double) {
  const DType dtype = sizeof(T) == 4 ? DType::f32 : DType::f64;
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  for (bool with_bias : {true, false}) {
    INFO((with_bias ? "bias" : "no bias"));
    const Grads fused = run([](const Tensor& x, const Tensor& w, const Tensor& b,
                               const Tensor& r) { return ops::linear_residual(x, w, b, r); },
                            dtype, with_bias);
    const Grads steps = run([](const Tensor& x, const Tensor& w, const Tensor& b,
                               const Tensor& r) { return r + ops::linear(x, w, b); },
                            dtype, with_bias);
    check_close(fused.y, steps.y, tol);
    check_close(fused.dx, steps.dx, tol);
    check_close(fused.dw, steps.dw, tol);
    check_close(fused.db, steps.db, tol);
    check_close(fused.dr, steps.dr, 0); // dy itself, in both
  }
}

TEST_CASE("linear_residual: one node; a view as the residual, or the input itself") {
  Tensor x = randn({4, 4}, 6), w = randn({4, 4}, 7);
  x.set_requires_grad(true);
  const Tensor y = ops::linear_residual(x, w, Tensor(), x.transpose(0, 1));
  CHECK(node_names(y) == std::vector<std::string>{"transpose", "linear_residual"});
  check_close(y, (x.transpose(0, 1) + ops::linear(x, w)).to_vector(), 1e-14);
  ops::sum(y).backward();
  const std::vector<double> fused = x.grad().to_vector();
  x.zero_grad();
  ops::sum(x.transpose(0, 1) + ops::linear(x, w)).backward();
  check_close(fused, x.grad().to_vector(), 1e-14);
  {
    NoGradGuard ng;
    CHECK_FALSE(ops::linear_residual(x, w, Tensor(), x).requires_grad());
  }
}

TEST_CASE("linear_residual: a residual of another shape or dtype is refused, naming both") {
  const Tensor x = randn({2, 3, 4}, 8, DType::f32), w = randn({5, 4}, 9, DType::f32);
  const std::string shape = error_of<std::invalid_argument>(
      [&] { (void)ops::linear_residual(x, w, Tensor(), randn({2, 3, 4}, 10, DType::f32)); });
  CHECK(contains(shape, "linear_residual: residual [2, 3, 4] float32 does not match the output [2, 3, 5] float32"));
  CHECK(contains(shape, "input [2, 3, 4] and weight [5, 4]"));
  const std::string dtype = error_of<std::invalid_argument>(
      [&] { (void)ops::linear_residual(x, w, Tensor(), randn({2, 3, 5}, 11, DType::f64)); });
  CHECK(contains(dtype, "residual [2, 3, 5] float64 does not match the output [2, 3, 5] float32"));
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)ops::linear_residual(x, w, Tensor(), Tensor()); }),
                 "linear_residual"));
}

TEST_CASE("GPT's blocks fold each residual add into its projection, unless a dropout sits between") {
  const Tensor tokens = Tensor::from_ints({1, 2, 3, 4, 5, 6}, {2, 3});
  auto names_and_grads = [&](double dropout, bool training) {
    models::GPTConfig cfg = tiny::gpt({.vocab = 11, .d_model = 8, .heads = 2, .layers = 2, .ffn = 16}, 8);
    cfg.dropout = dropout;
    models::GPT gpt(cfg, 3, DType::f64);
    gpt.train(training);
    const Tensor logits = gpt.forward(tokens, Tensor());
    const std::vector<std::string> names = node_names(logits); // before backward frees the graph
    ops::sum(logits * randn({2, 3, 11}, 12)).backward();
    return std::make_pair(names, std::make_pair(logits.to_vector(), test_support::gradients_of(gpt)));
  };
  const auto [fused_names, fused] = names_and_grads(0.0, true);
  CHECK(count(fused_names, "linear_residual") == 4); // attn.c_proj and mlp.c_proj of 2 blocks
  CHECK(count(fused_names, "add") == 1);             // the embeddings' tok_emb + pos_emb only
  // dropout p > 0 in training: c_proj, dropout, add, as nanoGPT writes them
  const auto [drop_names, dropped] = names_and_grads(0.1, true);
  CHECK(count(drop_names, "linear_residual") == 0);
  CHECK(count(drop_names, "add") == 5);
  // the same model with p > 0 in evaluation is the identity again: fused, and equal to p = 0
  const auto [eval_names, evaluated] = names_and_grads(0.1, false);
  CHECK(count(eval_names, "linear_residual") == 4);
  check_close(evaluated.first, fused.first, 0);
  check_close(evaluated.second, fused.second, 0);
}

TEST_CASE("GPT: the fused blocks give the numbers of the two-op blocks (x + c_proj(h))") {
  // The blocks' forward written out with linear and add against GPT::forward, same weights.
  models::GPT gpt(tiny::gpt({.vocab = 11, .d_model = 8, .heads = 2, .layers = 2, .ffn = 16}, 8), 5, DType::f64);
  const Tensor tokens = Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  const auto& body = *gpt.transformer;
  Tensor x = body.wte->forward(tokens) + body.wpe->forward(Tensor::from_ints({0, 1, 2, 3}, {4}));
  for (const auto& blk : gpt.transformer->h) {
    const Tensor y = x + blk->attn->forward(blk->ln_1->forward(x), Tensor());
    x = y + blk->mlp->forward(blk->ln_2->forward(y));
  }
  const Tensor out_weight = gpt.lm_head ? gpt.lm_head->weight : body.wte->weight;
  check_close(gpt.forward(tokens, Tensor()), ops::linear(body.ln_f->forward(x), out_weight).to_vector(), 1e-14);
}
