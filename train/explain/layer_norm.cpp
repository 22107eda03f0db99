#include "train/explain/layer_norm.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/gradcheck.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "train/explain/stages.hpp"
#include "train/explain/tensor_printer.hpp"

namespace headgrad::cli::explain {
namespace {


constexpr double kLayerNormEps = 1e-5; // PyTorch's default, and nn::LayerNorm's

// The example: row 0 by hand (gamma is 1 where its dy is not 0), row 1 to see gamma at work.
struct LayerNormExample {
  Tensor x = Tensor::from({1, 3, 5, 7, 2, -1, 0.5, 4.5}, {2, 4}, DType::f64);
  Tensor gamma = Tensor::from({1, 2, 1, 0.5}, {4}, DType::f64);
  Tensor beta = Tensor::from({0, 0.5, -0.5, 0}, {4}, DType::f64);
  Tensor dy = Tensor::from({1, 0, 0, 0, 0.5, -1, 2, 0}, {2, 4}, DType::f64);
};

// The forward in small ops, each a tensor autograd differentiates (the walkthrough's names).
struct SmallOps {
  Tensor mu, xc, var, rstd, xhat, y;
};
SmallOps small_ops(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  SmallOps s;
  s.mu = ops::mean(x, {1}, true);
  s.xc = x - s.mu;
  s.var = ops::mean(s.xc * s.xc, {1}, true);
  s.rstd = 1.0 / ops::sqrt(s.var + kLayerNormEps);
  s.xhat = s.xc * s.rstd;
  s.y = s.xhat * gamma + beta;
  return s;
}

// The gradients of L = sum(y * dy) with respect to x, gamma and beta.
struct LeafGrads {
  Tensor dx, dgamma, dbeta;
};
template <typename Forward> LeafGrads autograd_grads(const LayerNormExample& ex, Forward forward) {
  const Tensor x = ex.x.clone().set_requires_grad(), gamma = ex.gamma.clone().set_requires_grad(),
               beta = ex.beta.clone().set_requires_grad();
  ops::sum(forward(x, gamma, beta) * ex.dy).backward();
  return {x.grad(), gamma.grad(), beta.grad()};
}

} // namespace

ExplainResult run_layer_norm(const ExplainOptions& o) {
  const LayerNormExample ex;
  TensorPrinter p(o.precision, o.summary);
  p.line("Layer norm over the 4 features of each of 2 rows: y = xhat * gamma + beta, xhat = (x - mu) * rstd,");
  p.line(fmt::format("rstd = 1 / sqrt(var + eps), mu and var the row's mean and biased variance, eps {} (PyTorch's "
                     "default).",
                     kLayerNormEps));
  p.line("Loss L = sum(y * dy) for the fixed dy below, so dL/dy = dy. Row 0 is small enough to do by hand.");

  p.heading("forward");
  SmallOps s;
  {
    NoGradGuard no_grad;
    s = small_ops(ex.x, ex.gamma, ex.beta);
  }
  p.tensor("x", ex.x, "(rows, D)");
  p.tensor("mu = mean(x)", s.mu, "(rows, 1): the mean over each row's D features");
  p.tensor("xc = x - mu", s.xc, "centred: every row sums to 0");
  p.tensor("var = mean(xc * xc)", s.var, "(rows, 1): biased, divided by D (not D - 1)");
  p.tensor("rstd = 1 / sqrt(var + eps)", s.rstd, "(rows, 1)");
  p.tensor("xhat = xc * rstd", s.xhat, "each row: mean 0, mean square var / (var + eps), about 1");
  p.tensor("gamma", ex.gamma, "(D): layer norm's weight");
  p.tensor("beta", ex.beta, "(D): layer norm's bias");
  p.tensor("y = xhat * gamma + beta", s.y, "(rows, D)");

  p.heading("backward (the closed form the fused op computes)");
  Tensor dbeta, dgamma, g, mean_g, mean_gx, dx;
  {
    NoGradGuard no_grad;
    dbeta = ops::sum(ex.dy, {0});
    dgamma = ops::sum(ex.dy * s.xhat, {0});
    g = ex.dy * ex.gamma;
    mean_g = ops::mean(g, {1}, true);
    mean_gx = ops::mean(g * s.xhat, {1}, true);
    dx = s.rstd * (g - mean_g - s.xhat * mean_gx);
  }
  p.tensor("dy", ex.dy, "(rows, D): the upstream gradient, given");
  p.tensor("dbeta = column sums of dy", dbeta, "(D): beta is added to every row");
  p.tensor("dgamma = column sums of dy * xhat", dgamma, "(D)");
  p.tensor("g = dy * gamma", g, "(rows, D): the gradient at xhat");
  p.tensor("mean(g)", mean_g, "(rows, 1): what the path through mu takes away");
  p.tensor("mean(g * xhat)", mean_gx, "(rows, 1): what the path through var takes away, times xhat");
  p.tensor("dx = rstd * (g - mean(g) - xhat * mean(g * xhat))", dx, "(rows, D)");

  p.heading("checks");
  ExplainResult res;
  res.fused_match = true;
  const LeafGrads small = autograd_grads(ex, [](const Tensor& x, const Tensor& gm, const Tensor& bt) {
    return small_ops(x, gm, bt).y;
  });
  const LeafGrads fused = autograd_grads(ex, [](const Tensor& x, const Tensor& gm, const Tensor& bt) {
    return ops::layer_norm(x, gm, bt, kLayerNormEps);
  });
  const double worst_small = std::max({max_abs_diff(dx, small.dx), max_abs_diff(dgamma, small.dgamma),
                                       max_abs_diff(dbeta, small.dbeta)});
  const double worst_fused = std::max({max_abs_diff(dx, fused.dx), max_abs_diff(dgamma, fused.dgamma),
                                       max_abs_diff(dbeta, fused.dbeta)});
  res.stages_match_full_graph = worst_small <= 1e-12 && worst_fused <= 1e-12;
  p.line(fmt::format("dx, dgamma, dbeta vs autograd through mu, xc, var, rstd, xhat: max abs diff {:.1e} {}",
                     worst_small, worst_small <= 1e-12 ? "(same)" : "(DIFFERENT)"));
  p.line(fmt::format("dx, dgamma, dbeta vs ops::layer_norm's own backward: max abs diff {:.1e} {}", worst_fused,
                     worst_fused <= 1e-12 ? "(same)" : "(DIFFERENT)"));
  print_row_sums("dx", dx, p); // shifting a row's x changes no y
  const GradcheckResult gc =
      gradcheck([](const std::vector<Tensor>& in) { return ops::layer_norm(in[0], in[1], in[2], kLayerNormEps); },
                {ex.x, ex.gamma, ex.beta});
  res.gradcheck_ok = gc.ok;
  p.line(fmt::format("gradcheck of ops::layer_norm (float64, eps 1e-6, atol 1e-5, rtol 1e-3): {}",
                     gc.ok ? "PASS" : "FAIL"));
  res.text = p.take();
  return res;
}

} // namespace headgrad::cli::explain
