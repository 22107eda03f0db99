// autograd_checks.cpp - differential calls of small graphs that reuse intermediates: an output
// read twice, a softmax multiplied by its own transpose, a normalisation that reads its input on
// three paths. They check the tape (framework/core/autograd.cpp: every reader's contribution
// summed) against PyTorch's autograd, beyond the single ops the other families replay.
// Registered as "framework/core/autograd" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"

namespace headgrad::checks {
namespace {

// PyTorch's cases of these graphs (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> core_autograd_differential_calls() {
  using namespace ops;
  return {
      {"graph_tanh_reuse",
       unary_call([](const Tensor& t) {
         const Tensor e = tanh(t);
         return e * e + e;
       })},
      {"graph_softmax_gram",
       unary_call([](const Tensor& t) {
         const Tensor s = softmax(t, -1);
         return matmul(s, transpose(s, -1, -2));
       })},
      {"graph_norm",
       unary_call([](const Tensor& t) {
         const Tensor c = t - mean(t, {-1}, true);
         return c / sqrt(mean(c * c, {-1}, true) + 1e-5);
       })},
      {"graph_ffn_lse",
       [](const Inputs& x, const json&) {
         const Tensor h = relu(linear(x[0], x[1], x[2]));
         return Outputs{sum(h * h, {-1}) + logsumexp(h, {-1})};
       }},
  };
}

const RegisterChecks core_autograd_registered({.name = "framework/core/autograd",
                                               .differential_calls = core_autograd_differential_calls});

} // namespace
} // namespace headgrad::checks
