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

using headgrad::Tensor;
namespace ops = headgrad::ops;

// ---- the forward ---------------------------------------------------------------------------------
struct Forward {
  std::int64_t B = 2, T = 3, D = 5, V = 4; // batch, positions, features, classes
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

inline Forward forward(headgrad::Generator& gen) {
  constexpr auto f64 = headgrad::DType::f64;
  Forward f;
  f.x = Tensor::normal({f.B, f.T, f.D}, 0, 1, gen, f64).set_requires_grad();
  f.gamma = Tensor::normal({f.D}, 1, 0.5, gen, f64).set_requires_grad();
  f.beta = Tensor::normal({f.D}, 0, 0.5, gen, f64).set_requires_grad();
  f.W = Tensor::normal({f.V, f.D}, 0, 0.5, gen, f64).set_requires_grad();
  f.b = Tensor::normal({f.V}, 0, 0.5, gen, f64).set_requires_grad();
  f.targets = Tensor::from_ints({3, 0, 2, 1, 1, 0}, {f.B, f.T});
  const Tensor valid_lens = Tensor::from_ints({3, 2}, {f.B}); // the last position of row 1 is padding
  f.mask = ops::sequence_mask(valid_lens, f.T).to(f64);
  f.onehot = Tensor::zeros({f.B, f.T, f.V}, f64);
  const auto t = f.targets.to_int_vector();
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
// The forward written out must equal the fused ops::layer_norm and ops::cross_entropy; then every
// step runs on autograd's gradient of what its forward produced, and each tensor it computed is
// compared with autograd's own (Report: one line per tensor). Returns the exit code: 0 when every
// one passes.
inline int check_your_backward() {
  headgrad::Generator gen(0);
  const Forward f = forward(gen);
  exercise::Report report;
  {
    headgrad::NoGradGuard no_grad;
    report.require("the layer norm written out = ops::layer_norm",
                   exercise::max_abs_diff(f.y, ops::layer_norm(f.x, f.gamma, f.beta, f.eps)));
    report.require("the loss written out = ops::cross_entropy",
                   exercise::max_abs_diff(f.L, ops::cross_entropy(f.logits, f.targets, f.mask)));
  }
  const auto g = exercise::autograd_gradients(f.L, {{"L", f.L}, {"logits", f.logits}, {"y", f.y}, {"W", f.W},
                                                    {"b", f.b}, {"x", f.x}, {"gamma", f.gamma}, {"beta", f.beta}});
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
