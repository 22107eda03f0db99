// losses_checks.cpp - the checks of the losses (losses.cpp: mse_loss, l1_loss, smooth_l1_loss,
// binary_cross_entropy_with_logits, nll_loss), composites all: autograd composes their gradients.
// Registered as "framework/ops/losses" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

ops::Reduction reduction_named(const std::string& r) {
  return r == "mean" ? ops::Reduction::mean : r == "sum" ? ops::Reduction::sum : ops::Reduction::none;
}

// An input and a target whose difference stays 0.1 or more away from each of `kinks` (|d|'s 0,
// smooth L1's +-beta), so that a perturbation never crosses one.
Inputs pair_away_from(const Dims& s, std::uint64_t seed, const std::vector<double>& kinks) {
  NoGradGuard ng;
  const Tensor target = randn(s, seed);
  return {target + away_from(randn(s, seed + 1), kinks), target};
}

// Each loss under each reduction; the target is a leaf too (its gradient is -dx, or -x dl).
void losses_rows(GradcheckRows& t) {
  const std::vector<std::pair<std::string, ops::Reduction>> reductions{
      {"mean", ops::Reduction::mean}, {"sum", ops::Reduction::sum}, {"none", ops::Reduction::none}};
  for (const auto& [name, r] : reductions) {
    t.push_back(row(kLayers, "mse_loss " + name, "[3, 4]", [] { return pair_away_from({3, 4}, 1100, {}); },
          [r](const Inputs& x) { return ops::mse_loss(x[0], x[1], r); }));
    t.push_back(row(kLayers, "l1_loss " + name, "[3, 4]", [] { return pair_away_from({3, 4}, 1110, {0.0}); },
          [r](const Inputs& x) { return ops::l1_loss(x[0], x[1], r); }));
    t.push_back(row(kLayers, "smooth_l1_loss " + name, "[3, 4], beta 0.5 and 0", [] { return pair_away_from({3, 4}, 1120, {-0.5, 0, 0.5}); },
          [r](const Inputs& x) { return ops::smooth_l1_loss(x[0], x[1], r, 0.5) + ops::smooth_l1_loss(x[1], x[0], r, 0); }));
    t.push_back(row(kLayers, "binary_cross_entropy_with_logits " + name, "[2, 5]",
          [] { return Inputs{away_from_zero({2, 5}, 1130) * 3.0, positive({2, 5}, 1131) * 0.5}; },
          [r](const Inputs& x) { return ops::binary_cross_entropy_with_logits(x[0], x[1], r); }));
    t.push_back(row(kLayers, "nll_loss " + name, "[2, 3, 4], one target ignored", [] {
            return Inputs{randn({2, 3, 4}, 1140), ints({1, 3, -100, 0, 2, 2}, {2, 3})}; },
          [r](const Inputs& x) { return ops::nll_loss(x[0], x[1], r); }));
  }
  t.push_back(row(kLayers, "mse_loss transposed input", "[4, 3] viewed from [3, 4]", [] { return pair_away_from({3, 4}, 1150, {}); },
        [](const Inputs& x) { return ops::mse_loss(x[0].transpose(0, 1), x[1].transpose(0, 1)); }));
}

std::vector<MisuseRow> ops_losses_misuse_rows() {
  const Tensor x = f32({2, 3}), y = f32({2, 3}, 2);
  using namespace ops;
  return {
      {"mse_loss", {x, y}, [](const Args& a) { mse_loss(a[0], a[1]); }},
      {"l1_loss", {x, y}, [](const Args& a) { l1_loss(a[0], a[1]); }},
      {"smooth_l1_loss", {x, y}, [](const Args& a) { smooth_l1_loss(a[0], a[1]); }},
      {"binary_cross_entropy_with_logits", {x, y}, [](const Args& a) { binary_cross_entropy_with_logits(a[0], a[1]); }},
      {"nll_loss", {x, ints({0, 2}, {2})}, [](const Args& a) { nll_loss(a[0], a[1]); }},
  };
}

// PyTorch's cases (tests/reference/make_op_cases.py, family "losses"): p["reduction"], and
// smooth_l1_loss's p["beta"], nll_loss's p["ignore_index"].
std::vector<DifferentialCall> ops_losses_differential_calls() {
  using namespace ops;
  const auto r = [](const json& p) { return reduction_named(p["reduction"].get<std::string>()); };
  return {
      {"mse_loss", [r](const Inputs& x, const json& p) { return Outputs{mse_loss(x[0], x[1], r(p))}; }},
      {"l1_loss", [r](const Inputs& x, const json& p) { return Outputs{l1_loss(x[0], x[1], r(p))}; }},
      {"smooth_l1_loss",
       [r](const Inputs& x, const json& p) { return Outputs{smooth_l1_loss(x[0], x[1], r(p), p["beta"].get<double>())}; }},
      {"binary_cross_entropy_with_logits",
       [r](const Inputs& x, const json& p) { return Outputs{binary_cross_entropy_with_logits(x[0], x[1], r(p))}; }},
      {"nll_loss",
       [r](const Inputs& x, const json& p) {
         return Outputs{nll_loss(x[0], x[1], r(p), p["ignore_index"].get<std::int64_t>())};
       }},
  };
}

const RegisterChecks ops_losses_registered(
    {.name = "framework/ops/losses", .gradcheck_rows = {losses_rows}, .misuse_rows = ops_losses_misuse_rows,
     .differential_calls = ops_losses_differential_calls,
     .composite = {"mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy_with_logits", "nll_loss"}});

} // namespace
} // namespace headgrad::checks
