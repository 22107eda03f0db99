// optimizer_checks.cpp - differential calls of gradient clipping (optimizer.cpp: clip_grad_norm,
// torch.nn.utils.clip_grad_norm_). The optimizers' updates have a golden test of their own
// (tests/test_optim_golden.cpp).
// Registered as "framework/optim/optimizer" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/optim/optimizer.hpp"

namespace headgrad::checks {
namespace {

// clip_grad_norm over parameters whose gradients are the inputs: the norm (0-d, the gradients'
// dtype) and the clipped gradients, as make_op_cases.py's t_clip_grad_norm.
Outputs clip_grad_norm_call(const Inputs& x, const json& p) {
  std::vector<Tensor> params;
  for (const Tensor& g : x) {
    Tensor t = Tensor::zeros(g.shape(), g.dtype());
    t.set_requires_grad(true);
    t.impl()->grad = g.clone().impl_ptr();
    params.push_back(t);
  }
  const double norm = optim::clip_grad_norm(params, p["max_norm"].get<double>());
  Outputs out{Tensor::from({norm}, {}, x[0].dtype())};
  for (const Tensor& t : params) out.push_back(t.grad());
  return out;
}

// PyTorch's cases of clipping (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> optim_optimizer_differential_calls() { return {{"clip_grad_norm", clip_grad_norm_call}}; }

const RegisterChecks optim_optimizer_registered({.name = "framework/optim/optimizer",
                                                 .differential_calls = optim_optimizer_differential_calls});

} // namespace
} // namespace headgrad::checks
