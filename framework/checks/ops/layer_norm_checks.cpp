// layer_norm_checks.cpp - the checks of layer norm (layer_norm.cpp:
// layer_norm, add_layer_norm).
// Registered as "framework/ops/layer_norm" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_layer_norm_derivatives = R"(
350 | add_layer_norm (w, b each optional, as layer_norm) | `s = x + y`, `out = layer_norm(s)`
    | `ds` = layer_norm's `dx` (and `dw`, `db`); `dx += ds`, `dy += ds` | s, μ, r
    | `layer_norm.cpp` · `add_layer_norm`; kernels `layer_norm_forward`, `add_layer_norm_forward`, `layer_norm_backward` (book loops beside the op; engine `engine/kernels/layer_norm_rows.hpp`)
370 | layer_norm (w, b each optional: 1, 0; D = 0 gives an empty result)
    | `x̂ = (x − μ) r`, `r = 1/√(σ² + ε)`, `y = x̂ ⊙ w + b`; two passes (μ, then σ²); a row whose sum or squares
      overflow is redone on `x / 2^k` with `r = 1 / hypot(2^k σ_k, √ε)` — exact where PyTorch gives NaN
    | `g = dy ⊙ w`; `dx += r (g − mean(g) − x̂ mean(g ⊙ x̂))`; `dw += Σ_rows dy ⊙ x̂`; `db += Σ_rows dy`
    | x, μ, r | `layer_norm.cpp` · `layer_norm`; kernels `layer_norm_forward`, `add_layer_norm_forward`, `layer_norm_backward` (book loops beside the op; engine `engine/kernels/layer_norm_rows.hpp`)
)";

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

// layer_norm's affine inputs x[first...] as make_op_cases.py's t_layer_norm reads them: weight and
// bias, or the one p does not leave out (its "ref_exp" concerns the reference alone).
std::pair<Tensor, Tensor> affine_of(const Inputs& x, std::size_t first, const json& p) {
  if (x.size() == first + 2) return {x[first], x[first + 1]};
  if (x.size() == first + 1) return p.value("no_weight", false) ? std::pair{Tensor(), x[first]} : std::pair{x[first], Tensor()};
  return {Tensor(), Tensor()};
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_layer_norm_differential_calls() {
  using namespace ops;
  return {
      {"layer_norm",
       [](const Inputs& x, const json& p) {
         const auto [w, b] = affine_of(x, 1, p);
         return Outputs{layer_norm(x[0], w, b, p["eps"])};
       }},
      {"add_layer_norm",
       [](const Inputs& x, const json& p) {
         const auto [w, b] = affine_of(x, 2, p);
         return Outputs{add_layer_norm(x[0], x[1], w, b, p["eps"])};
       }},
  };
}

const RegisterChecks ops_layer_norm_registered({"framework/ops/layer_norm", {layer_norm_rows}, ops_layer_norm_misuse_rows,
                                                ops_layer_norm_differential_calls, ops_layer_norm_derivatives});

} // namespace
} // namespace headgrad::checks
