// layers_checks.cpp - gradient-check rows of the nn modules (layers.hpp), built in float32 and
// converted to float64 as a user checks a block of their own.
// Registered as "framework/nn/layers" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/nn/layers.hpp"

namespace headgrad::checks {
namespace {

// nn::Sequential built in float32 and converted with Module::to(float64), as a user checks a
// float32 block of their own: w.r.t. the input and every parameter, reported by name ("0.weight").
void sequential_rows(GradcheckRows& cases) {
  cases.push_back(module_row(
      kLayers, "Sequential Linear GELU LayerNorm Linear, float32 made float64 by Module::to",
      "x [2, 3, 4], 4 -> 6 -> 3", {{2, 3, 4}},
      [] {
        Generator g(81);
        auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 6, true, g), std::make_shared<nn::GELU>(),
                                                    std::make_shared<nn::LayerNorm>(6),
                                                    std::make_shared<nn::Linear>(6, 3, true, g));
        seq->to(f64);
        return seq;
      },
      [](nn::Sequential& m, const std::vector<Tensor>& x) { return m.forward(x[0]); }));
}

const RegisterChecks nn_layers_registered({.name = "framework/nn/layers",
                                           .gradcheck_rows = {sequential_rows}});

} // namespace
} // namespace headgrad::checks
