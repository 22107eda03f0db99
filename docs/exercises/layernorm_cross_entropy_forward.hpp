// layernorm_cross_entropy_forward.hpp - what the layernorm-cross-entropy exercise
// (layernorm_cross_entropy.cpp) and its solution share: the forward, written out in small ops
// (struct Forward holds every tensor with its shape, forward() computes them), the three step
// functions you write (declared here, defined in layernorm_cross_entropy.cpp) and the check that
// runs them against autograd.
#pragma once
#include "docs/exercises/exercise_check.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "framework/engine/runtime/startup.hpp"

using headgrad::Tensor;
namespace ops = headgrad::ops;

// ---- the forward ---------------------------------------------------------------------------------
struct Forward {
  std::int64_t B = 0, T = 0, D = 0, V = 0; // batch, positions, features, classes
  double eps = 1e-5;                       // layer norm's epsilon (PyTorch's default)
  Tensor x;                  // (B, T, D)  the input
  Tensor gamma, beta;        // (D)        layer norm's weight and bias
  Tensor mu, xc, var, rstd;  // (B, T, 1), (B, T, D), (B, T, 1), (B, T, 1)
  Tensor xhat;               // (B, T, D)  (x - mu) rstd, rstd = 1/sqrt(var + eps), biased var
  Tensor y;                  // (B, T, D)  layer norm's output, xhat ⊙ gamma + beta
  Tensor W, b;               // (V, D), (V) the output layer
  Tensor logits;             // (B, T, V)  y Wᵀ + b
  Tensor targets;            // (B, T)     int64 classes
  Tensor mask;               // (B, T)     1.0 where a position counts (t < valid_lens[b]), else 0.0
  Tensor N;                  // ()         the number of counted positions, sum(mask)
  Tensor onehot;             // (B, T, V)  1.0 at each position's target class
  Tensor lse, logp, picked;  // (B, T, 1), (B, T, V), (B, T, 1): logsumexp, log-probabilities, logp at the target
  Tensor L;                  // ()         -sum(picked ⊙ mask) / N
};

// The forward in small ops, the way autograd sees it, from the inputs and parameters.
inline Forward forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& W, const Tensor& b,
                       const Tensor& targets, const Tensor& valid_lens) {
  constexpr auto f64 = headgrad::DType::f64;
  Forward f;
  f.B = x.shape()[0];
  f.T = x.shape()[1];
  f.D = x.shape()[2];
  f.V = W.shape()[0];
  f.x = x;
  f.gamma = gamma;
  f.beta = beta;
  f.W = W;
  f.b = b;
  f.targets = targets;
  f.mask = ops::sequence_mask(valid_lens, f.T).to(f64);
  f.onehot = Tensor::zeros({f.B, f.T, f.V}, f64);
  const auto t = targets.to_int_vector();
  for (std::size_t r = 0; r < t.size(); ++r) f.onehot.data<double>()[r * f.V + t[r]] = 1.0;

  f.mu = ops::mean(f.x, {2}, true);
  f.xc = f.x - f.mu;
  f.var = ops::mean(f.xc * f.xc, {2}, true);
  f.rstd = 1.0 / ops::sqrt(f.var + f.eps);
  f.xhat = f.xc * f.rstd;
  f.y = f.xhat * f.gamma + f.beta;
  f.logits = ops::linear(f.y, f.W, f.b);
  f.lse = ops::logsumexp(f.logits, {2}, true);
  f.logp = f.logits - f.lse;
  f.picked = ops::gather(f.logp, 2, ops::unsqueeze(f.targets, 2));
  f.N = ops::sum(f.mask);
  f.L = -ops::sum(ops::unsqueeze(f.mask, 2) * f.picked) / f.N;
  return f;
}

// ---- your backward (layernorm_cross_entropy.cpp): three steps, from the loss back to x ------------
void step_cross_entropy(const Forward& f, const Tensor& dL, Tensor& dlogits);
void step_linear(const Forward& f, const Tensor& dlogits, Tensor& dy, Tensor& dW, Tensor& db);
void step_layer_norm(const Forward& f, const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

// ---- the check: every tensor you computed against autograd's --------------------------------------
// Autograd differentiates its own copy of the forward, built on leaves; your steps get another copy,
// of the same values, built on tensors that carry no gradient and no graph: what you hand back is
// what you computed. The loss autograd starts from is L / 3, as when gradients are accumulated over
// three micro-batches (each backward from its loss divided by their count), so dL = 1/3, not 1.
// The written-out forward must equal the fused ops::layer_norm and ops::cross_entropy; then every
// step runs on autograd's gradient of what its forward produced, and each tensor it computed is
// compared with autograd's own (Report: one line per tensor). Returns the exit code: 0 when every
// one passes.
inline int check_your_backward() {
  constexpr auto f64 = headgrad::DType::f64;
  headgrad::Generator gen(0);
  const std::int64_t B = 2, T = 3, D = 5, V = 4; // batch, positions, features, classes
  const Tensor x = Tensor::normal({B, T, D}, 0, 1, gen, f64);
  const Tensor gamma = Tensor::normal({D}, 1, 0.5, gen, f64);
  const Tensor beta = Tensor::normal({D}, 0, 0.5, gen, f64);
  const Tensor W = Tensor::normal({V, D}, 0, 0.5, gen, f64);
  const Tensor b = Tensor::normal({V}, 0, 0.5, gen, f64);
  const Tensor targets = Tensor::from_ints({3, 0, 2, 1, 1, 0}, {B, T});
  const Tensor valid_lens = Tensor::from_ints({3, 2}, {B}); // the last position of row 1 is padding
  auto leaf = [](const Tensor& t) { return t.clone().set_requires_grad(); };
  const Forward ref = forward(leaf(x), leaf(gamma), leaf(beta), leaf(W), leaf(b), targets, valid_lens);
  Forward f;
  {
    headgrad::NoGradGuard no_grad;
    f = forward(x.clone(), gamma.clone(), beta.clone(), W.clone(), b.clone(), targets, valid_lens);
  }
  exercise::Report report;
  {
    headgrad::NoGradGuard no_grad;
    report.require("the layer norm written out = ops::layer_norm",
                   exercise::max_abs_diff(f.y, ops::layer_norm(f.x, f.gamma, f.beta, f.eps)));
    report.require("the loss written out = ops::cross_entropy",
                   exercise::max_abs_diff(f.L, ops::cross_entropy(f.logits, f.targets, f.mask)));
  }
  const Tensor accumulated = ref.L / 3.0; // one of three micro-batches: dL = 1/3
  const auto g = exercise::autograd_gradients(accumulated, {{"L", ref.L}, {"logits", ref.logits}, {"y", ref.y},
                                                            {"W", ref.W}, {"b", ref.b}, {"x", ref.x},
                                                            {"gamma", ref.gamma}, {"beta", ref.beta}});
  Tensor dlogits, dy, dW, db, dx, dgamma, dbeta;
  report.step("1. cross-entropy, fused: L = masked mean of -log softmax(logits)[target]",
              [&] { step_cross_entropy(f, g.at("L"), dlogits); });
  report.compare("dlogits", dlogits, g.at("logits"));
  report.step("2. the output layer: logits = y W^T + b", [&] { step_linear(f, g.at("logits"), dy, dW, db); });
  report.compare("dy", dy, g.at("y"));
  report.compare("dW", dW, g.at("W"));
  report.compare("db", db, g.at("b"));
  report.step("3. layer norm, fused: y = (x - mu) rstd * gamma + beta",
              [&] { step_layer_norm(f, g.at("y"), dx, dgamma, dbeta); });
  report.compare("dgamma", dgamma, g.at("gamma"));
  report.compare("dbeta", dbeta, g.at("beta"));
  report.compare("dx", dx, g.at("x"));
  return report.finish();
}

// The program: the check, after the start-up every headgrad program makes (the BLAS kernel).
inline int layernorm_exercise_main(int argc, char** argv) {
  headgrad::runtime::configure(argc, argv);
  if (argc > 1) {
    fmt::print(stderr, "usage: {} (no arguments)\n", argv[0]);
    return 2;
  }
  return check_your_backward();
}
