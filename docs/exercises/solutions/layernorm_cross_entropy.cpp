// solutions/layernorm_cross_entropy.cpp - the solution of docs/exercises/layernorm_cross_entropy.cpp:
// the same file with every TODO filled in (diff the two to see the answers only).
//
// layernorm_cross_entropy.cpp - exercise: the fused backward of cross-entropy and of layer norm,
// each in one formula, checked against autograd (makemore part 4's exercises 2 and 3, "become a
// backprop ninja", with layer norm where the notebook has batch norm).
//
//   ./dev.sh exercise layernorm-cross-entropy              builds this file alone and runs it
//   ./dev.sh exercise layernorm-cross-entropy --solution   the same for solutions/layernorm_cross_entropy.cpp
//
// The forward: a layer norm over the features of x, a linear layer to V classes, and the masked
// mean cross-entropy over the positions t < valid_lens[b] - the last steps of headgrad's sequence
// model (models/transformer.cpp). Below it is written out in small ops, the way autograd sees it;
// main() checks it against the fused ops::layer_norm and ops::cross_entropy, whose backward you
// write here in one formula each instead of one step per small op.
//
// Your part: the three step functions under "your backward"; each TODO(name) is one tensor. Each
// step receives the forward's tensors and autograd's gradient of what its forward produced, so
// each is checked on its own. Run the program after each step: one line per tensor, max |yours -
// autograd's| and PASS (within 1e-10) or FAIL; the exit code is 0 only when every tensor passes.
// docs/backprop-through-attention.md (step 1) and framework/ops/DERIVATIVES.md (layer_norm) have
// the formulas, once you have tried.
//
// What you can use (headgrad's ops; nothing records a graph here):
//   ops::matmul(a, b), a.transpose(i, j), a.reshape({...}), a + b, a - b, a * b, a / b, a * 2.0
//   ops::sum(a, {axes}, keepdim), ops::mean(a, {axes}, keepdim), ops::softmax(a) (last axis)
//   ops::unsqueeze(a, axis)      (B, T) -> (B, T, 1), to broadcast a per-position value
#include "docs/exercises/exercise_check.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/random.hpp"

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

Forward forward(headgrad::Generator& gen) {
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

// ---- your backward: three steps, from the loss back to x -------------------------------------------

// 1. Cross-entropy, fused. Forward: lse, logp, picked and L above, from the logits.
//    Given dL (a scalar, 1 here: L is the loss), compute dlogits (B, T, V) in one expression, not
//    through lse, logp and picked. A position the mask leaves out gets 0.
void step_cross_entropy(const Forward& f, const Tensor& dL, Tensor& dlogits) {
  // dL/dlogits_r = (softmax(logits_r) - onehot_r) mask_r / N: the log-softmax and the pick in one
  dlogits = (ops::softmax(f.logits) - f.onehot) * ops::unsqueeze(f.mask, 2) * (dL / f.N);
}

// 2. The output layer. Forward: logits = y Wᵀ + b over the B*T rows of y.
//    Given dlogits (B, T, V), compute dy (B, T, D), dW (V, D) and db (V).
void step_linear(const Forward& f, const Tensor& dlogits, Tensor& dy, Tensor& dW, Tensor& db) {
  dy = ops::matmul(dlogits, f.W); // (B, T, V) @ (V, D): dlogits W
  dW = ops::matmul(dlogits.reshape({-1, f.V}).transpose(0, 1), f.y.reshape({-1, f.D})); // (V, B*T) @ (B*T, D)
  db = ops::sum(dlogits, {0, 1}); // b was added to every row
}

// 3. Layer norm, fused. Forward: mu, xc, var, rstd, xhat and y above, from x, gamma and beta.
//    Given dy (B, T, D), compute dgamma (D), dbeta (D) and dx (B, T, D) in one formula, not
//    through xhat, rstd, var, xc and mu (you may use f.xhat and f.rstd).
void step_layer_norm(const Forward& f, const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  dgamma = ops::sum(dy * f.xhat, {0, 1});
  dbeta = ops::sum(dy, {0, 1});
  // g = dy ⊙ gamma, the gradient at xhat; then dx = rstd (g - mean(g) - xhat mean(g ⊙ xhat)), means
  // over the D features of each row: the paths through mu and var, summed in closed form
  const Tensor gx = dy * f.gamma;
  dx = f.rstd * (gx - ops::mean(gx, {2}, true) - f.xhat * ops::mean(gx * f.xhat, {2}, true));
}

// ---- the check: every tensor you computed against autograd's --------------------------------------
int main() {
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
