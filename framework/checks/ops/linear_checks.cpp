// linear_checks.cpp - the checks of linear and its fused activations
// (linear.cpp: linear, linear_relu, linear_gelu) and of linear_residual.
// Registered as "framework/ops/linear" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_linear_derivatives = R"(
310 | linear | `y = x Wᵀ + b` | `dx += dy W`, `dW += dyᵀ x`, `db += Σ_rows dy` | x, W
    | `linear.cpp` · `linear`; kernels `gemm` (`matmul.cpp`'s book loop; engine: BLAS), `column_sums`
320 | linear_relu | `z = x Wᵀ + b`, `y = relu(z)` | `dz = dy ⊙ [y > 0]`, then linear's VJP with `dz` | x, W, y
    | `linear.cpp` · `linear_relu`
330 | linear_gelu
    | `z = x Wᵀ + b`, `y = gelu(z)` (either form; bias, GELU and `gelu'(z)` in one pass over the gemm's output)
    | `dz = dy ⊙ gelu'(z)`, then linear's VJP with `dz` | x, W, gelu'(z)
    | `linear.cpp` · `linear_gelu`; kernel `gelu_rows` (book loop in `unary.cpp`)
340 | linear_residual | `y = r + x Wᵀ + b` (the gemm adds `x Wᵀ` onto `r + b`, beta 1: no add of its own)
    | `dr += dy`, then linear's VJP with `dy` | x, W
    | `linear.cpp` · `linear_residual`; kernel `add_rows`
)";

// Linear, with and without bias, and its fused activations.
void linear_rows(GradcheckRows& cases) {
  cases.push_back(row(kLayers, "linear with bias", "x [2, 3, 4], W [5, 4], b [5]",
                      [] { return std::vector{randn({2, 3, 4}, 30), randn({5, 4}, 31), randn({5}, 32)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear no bias, 1-D input", "x [4], W [3, 4]",
                      [] { return std::vector{randn({4}, 33), randn({3, 4}, 34)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1]); }));
  cases.push_back(row(kLayers, "linear, transposed input", "x [4, 3]^T, W [2, 4]",
                      [] { return std::vector{randn({4, 3}, 35), randn({2, 4}, 36), randn({2}, 37)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0].transpose(0, 1), x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear_relu with bias", "x [2, 3, 4], W [5, 4], b [5]",
                      [] { return std::vector{randn({2, 3, 4}, 38), randn({5, 4}, 39), randn({5}, 46)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear_relu(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear_gelu with bias (erf form)", "x [2, 3, 4], W [5, 4], b [5] (N(0, 4))",
                      [] { return std::vector{randn({2, 3, 4}, 54), ops::mul_scalar(randn({5, 4}, 55), 2.0), randn({5}, 56)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear_gelu(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear_gelu tanh form, no bias, transposed input", "x [4, 3]^T, W [6, 4]",
                      [] { return std::vector{randn({4, 3}, 57), ops::mul_scalar(randn({6, 4}, 58), 2.0)}; },
                      [](const std::vector<Tensor>& x) {
                        return ops::linear_gelu(x[0].transpose(0, 1), x[1], Tensor(), ops::GeluApproximate::tanh);
                      }));
  cases.push_back(row(kLayers, "linear_residual with bias", "x [2, 3, 4], W [5, 4], b [5], residual [2, 3, 5]",
                      [] { return std::vector{randn({2, 3, 4}, 59), randn({5, 4}, 60), randn({5}, 61), randn({2, 3, 5}, 62)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear_residual(x[0], x[1], x[2], x[3]); }));
  cases.push_back(row(kLayers, "linear_residual no bias, residual a transpose view, the input itself",
                      "x [3, 3], W [3, 3], residual x^T", [] { return std::vector{randn({3, 3}, 63), randn({3, 3}, 64)}; },
                      [](const std::vector<Tensor>& x) {
                        return ops::linear_residual(x[0], x[1], Tensor(), x[0].transpose(0, 1));
                      }));
  cases.push_back(row(kLayers, "linear with in_features 0 (only the bias matters)", "x [3, 0], W [2, 0], b [2]",
                      [] { return std::vector{randn({3, 0}, 38), randn({2, 0}, 39), randn({2}, 49)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1], x[2]); }));
}

// Linear: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_linear_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"linear", {x, f32({5, 4}), f32({5})}, [](const Args& a) { linear(a[0], a[1], a[2]); }, {2}},
    {"linear_relu", {x, f32({5, 4}), f32({5})}, [](const Args& a) { linear_relu(a[0], a[1], a[2]); }, {2}},
    {"linear_gelu", {x, f32({5, 4}), f32({5})}, [](const Args& a) { linear_gelu(a[0], a[1], a[2]); }, {2}},
    {"linear_gelu", {x, f32({5, 4}), f32({5})},
     [](const Args& a) { linear_gelu(a[0], a[1], a[2], GeluApproximate::tanh); }, {2}},
    {"linear_residual", {x, f32({5, 4}), f32({5}), f32({2, 3, 5})},
     [](const Args& a) { linear_residual(a[0], a[1], a[2], a[3]); }, {2}},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_linear_differential_calls() {
  using namespace ops;
  return {
      {"linear", [](const Inputs& x, const json&) { return Outputs{linear(x[0], x[1], optional_input(x, 2))}; }},
      {"linear_relu",
       [](const Inputs& x, const json&) { return Outputs{linear_relu(x[0], x[1], optional_input(x, 2))}; }},
      {"linear_gelu",
       [](const Inputs& x, const json& p) { return Outputs{linear_gelu(x[0], x[1], optional_input(x, 2), gelu_form(p))}; }},
      {"linear_residual",
       [](const Inputs& x, const json&) { return Outputs{linear_residual(x[0], x[1], optional_input(x, 3), x[2])}; }},
  };
}

const RegisterChecks ops_linear_registered({"framework/ops/linear", {linear_rows}, ops_linear_misuse_rows,
                                            ops_linear_differential_calls, ops_linear_derivatives});

} // namespace
} // namespace headgrad::checks
