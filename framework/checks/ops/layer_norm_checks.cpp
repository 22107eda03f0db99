// layer_norm_checks.cpp - gradient-check and misuse rows of layer norm (layer_norm.cpp:
// layer_norm, add_layer_norm).
// Registered as "framework/ops/layer_norm" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Layer norm with and without its affine parameters, and fused with a residual add.
void layer_norm_rows(GradcheckRows& cases) {
  cases.push_back(row(kLayers, "add_layer_norm", "x, y [2, 3, 6], w [6], b [6]",
                      [] { return std::vector{randn({2, 3, 6}, 47), randn({2, 3, 6}, 48), randn({6}, 49), randn({6}, 53)}; },
                      [](const std::vector<Tensor>& x) { return ops::add_layer_norm(x[0], x[1], x[2], x[3]); }));
  cases.push_back(row(kLayers, "layer_norm", "x [2, 3, 6], w [6], b [6]",
                      [] { return std::vector{randn({2, 3, 6}, 40), randn({6}, 41), randn({6}, 42)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "layer_norm, one row of 2", "x [1, 2]",
                      [] { return std::vector{randn({1, 2}, 43), randn({2}, 44), randn({2}, 45)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "layer_norm without affine parameters", "x [3, 5]",
                      [] { return std::vector{randn({3, 5}, 46)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], Tensor(), Tensor()); }));
  cases.push_back(row(kLayers, "layer_norm weight only, transposed input", "x [4, 2]^T, w [4]",
                      [] { return std::vector{randn({4, 2}, 47), randn({4}, 48)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0].transpose(0, 1), x[1], Tensor()); }));
}

// Layer norm: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_layer_norm_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"layer_norm", {x, f32({4}), f32({4})}, [](const Args& a) { layer_norm(a[0], a[1], a[2]); }, {1, 2}},
    {"add_layer_norm", {x, x, f32({4}), f32({4})}, [](const Args& a) { add_layer_norm(a[0], a[1], a[2], a[3]); },
     {2, 3}},
  };
}

const RegisterChecks ops_layer_norm_registered({"framework/ops/layer_norm", {layer_norm_rows},
                                                ops_layer_norm_misuse_rows});

} // namespace
} // namespace headgrad::checks
