// unary_checks.cpp - the checks of the unary math (unary.cpp): exp, log,
// sqrt, pow with a scalar exponent, tanh, relu, gelu, abs, sigmoid, clamp.
// Registered as "framework/ops/unary" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_unary_derivatives = R"(
100 | exp | `y = eˣ` | `dx += dy ⊙ y` | x, y
    | `unary.cpp` · `Exp`; kernel `exp_n` (engine: SLEEF)
110 | log | `y = ln x` | `dx += dy / x` | x, y
    | `unary.cpp` · `Log`; kernel `log_n` (engine: SLEEF)
120 | sqrt | `y = √x` | `dx += dy / (2y)` | x, y | `unary.cpp` · `Sqrt`
130 | pow (scalar p)
    | `y = xᵖ` (PyTorch's special cases: `p = ½` is `sqrt`, `−½` is `1/sqrt`, `±1, ±2, 3` are products)
    | `dx += dy ⊙ p xᵖ⁻¹`, 0 for `p = 0` | x, y | `unary.cpp` · `Pow`
140 | tanh | `y = tanh x` | `dx += dy ⊙ (1 − y²)` | x, y
    | `unary.cpp` · `Tanh`; kernel `tanh_n` (engine: SLEEF)
150 | relu | `y = max(x, 0)` (NaN stays NaN)
    | `dx += dy ⊙ [not x ≤ 0]`: 0 at 0, `dy` passed on at NaN (PyTorch's `threshold_backward`) | x, y
    | `unary.cpp` · `Relu`
160 | abs | `y = abs(x)` | `dx += dy ⊙ sign(x)` (0 at 0 and at NaN) | x, y | `unary.cpp` · `Abs`
170 | sigmoid | `y = 1 / (1 + e⁻ˣ)` | `dx += dy ⊙ y (1 − y)` | x, y | `unary.cpp` · `Sigmoid`
180 | clamp | `y = min(max(x, lo), hi)` (either bound optional; `hi` wins when `lo > hi`; NaN stays NaN)
    | `dx += dy ⊙ [lo ≤ x ≤ hi]` (bounds included, NaN excluded) | x, y | `unary.cpp` · `Clamp`
185 | hardtanh | `y = min(max(x, lo), hi)`, `lo = −1`, `hi = 1` by default (`lo > hi` refused)
    | `dx += dy ⊙ [lo < x < hi]` (0 on the bounds, PyTorch's `hardtanh_backward`) | x, y | `unary.cpp` · `Hardtanh`
190 | gelu (erf, `approximate = none`, the default) | `y = x Φ(x) = ½x(1 + erf(x/√2))`
    | `dx += dy ⊙ (Φ(x) + x φ(x))`, `φ(x) = e^{−x²/2}/√(2π)`
    | dy/dx (the forward computes it with y, in one pass)
    | `unary.cpp` · `gelu`; kernel `gelu_rows` (book loop in `unary.cpp`; engine `engine/kernels/isa/vector_math_isa.cpp`)
200 | gelu (`approximate = tanh`) | `y = ½x(1 + tanh u)`, `u = √(2/π)(x + 0.044715x³)`
    | `dx += dy ⊙ (½(1 + tanh u) + ½x(1 − tanh²u)√(2/π)(1 + 3·0.044715x²))` | dy/dx (as above)
    | `unary.cpp` · `gelu`; kernel `gelu_rows` (as above)
)";

void unary_rows(GradcheckRows& t) {
  t.add("exp", "[2, 3]", [] { return Inputs{randn({2, 3}, 300)}; }, [](const Inputs& x) { return ops::exp(x[0]); });
  t.add("exp of a transpose view", "[4, 3]^T", [] { return Inputs{randn({4, 3}, 301)}; },
        [](const Inputs& x) { return ops::exp(ops::transpose(x[0], 0, 1)); });
  t.add("log", "[2, 3] (positive)", [] { return Inputs{positive({2, 3}, 310)}; },
        [](const Inputs& x) { return ops::log(x[0]); });
  t.add("log of exp (composite)", "[5]", [] { return Inputs{randn({5}, 311)}; },
        [](const Inputs& x) { return ops::log(ops::add_scalar(ops::exp(x[0]), 1.0)); });
  t.add("sqrt", "[2, 3] (positive)", [] { return Inputs{positive({2, 3}, 320)}; },
        [](const Inputs& x) { return ops::sqrt(x[0]); });
  t.add("sqrt of a permuted view", "[2, 3, 2] permute(2, 1, 0) (positive)", [] { return Inputs{positive({2, 3, 2}, 321)}; },
        [](const Inputs& x) { return ops::sqrt(ops::permute(x[0], {2, 1, 0})); });
  t.add("pow 2", "[2, 3]", [] { return Inputs{randn({2, 3}, 330)}; }, [](const Inputs& x) { return ops::pow(x[0], 2.0); });
  t.add("pow 3", "[3, 2]", [] { return Inputs{randn({3, 2}, 331)}; }, [](const Inputs& x) { return ops::pow(x[0], 3.0); });
  t.add("pow 0.5", "[4] (positive)", [] { return Inputs{positive({4}, 332)}; },
        [](const Inputs& x) { return ops::pow(x[0], 0.5); });
  t.add("pow -1", "[2, 2] (positive)", [] { return Inputs{positive({2, 2}, 333)}; },
        [](const Inputs& x) { return ops::pow(x[0], -1.0); });
  t.add("pow 0", "[3]", [] { return Inputs{positive({3}, 334)}; }, [](const Inputs& x) { return ops::pow(x[0], 0.0); });
  t.add("tanh", "[2, 4]", [] { return Inputs{randn({2, 4}, 340)}; }, [](const Inputs& x) { return ops::tanh(x[0]); });
  t.add("tanh large inputs", "[6] (N(0, 9))", [] { return Inputs{ops::mul_scalar(randn({6}, 341), 3.0)}; },
        [](const Inputs& x) { return ops::tanh(x[0]); });
  t.add("relu", "[3, 4] (|x| >= 0.1)", [] { return Inputs{away_from_zero({3, 4}, 350)}; },
        [](const Inputs& x) { return ops::relu(x[0]); });
  t.add("relu of a transpose view", "[4, 3]^T (|x| >= 0.1)", [] { return Inputs{away_from_zero({4, 3}, 351)}; },
        [](const Inputs& x) { return ops::relu(ops::transpose(x[0], 0, 1)); });
  t.add("gelu tanh", "[3, 4]", [] { return Inputs{ops::mul_scalar(randn({3, 4}, 360), 2.0)}; },
        [](const Inputs& x) { return ops::gelu(x[0], ops::GeluApproximate::tanh); });
  t.add("gelu tanh 3-D", "[2, 2, 3]", [] { return Inputs{randn({2, 2, 3}, 361)}; },
        [](const Inputs& x) { return ops::gelu(x[0], ops::GeluApproximate::tanh); });
  t.add("gelu erf", "[3, 4]", [] { return Inputs{ops::mul_scalar(randn({3, 4}, 362), 2.0)}; },
        [](const Inputs& x) { return ops::gelu(x[0]); });
  t.add("gelu erf of a transpose view", "[4, 3]^T (N(0, 9))", [] { return Inputs{ops::mul_scalar(randn({4, 3}, 363), 3.0)}; },
        [](const Inputs& x) { return ops::gelu(ops::transpose(x[0], 0, 1), ops::GeluApproximate::none); });
  t.add("abs", "[3, 4] (|x| >= 0.1)", [] { return Inputs{away_from_zero({3, 4}, 370)}; },
        [](const Inputs& x) { return ops::abs(x[0]); });
  t.add("abs of a transpose view", "[2, 3]^T (|x| >= 0.1)", [] { return Inputs{away_from_zero({2, 3}, 371)}; },
        [](const Inputs& x) { return ops::abs(ops::transpose(x[0], 0, 1)); });
  t.add("sigmoid", "[2, 4] (N(0, 9))", [] { return Inputs{ops::mul_scalar(randn({2, 4}, 372), 3.0)}; },
        [](const Inputs& x) { return ops::sigmoid(x[0]); });
  // values 0.1 or more away from the bounds, so a perturbation never crosses one
  t.add("clamp both bounds", "[3, 4] to [-0.5, 0.45]", [] { return Inputs{away_from(randn({3, 4}, 373), {-0.5, 0.45})}; },
        [](const Inputs& x) { return ops::clamp(x[0], -0.5, 0.45); });
  t.add("clamp min only of a permuted view", "[2, 3, 2] permute(2, 0, 1) min 0.05",
        [] { return Inputs{away_from(randn({2, 3, 2}, 374), {0.05})}; },
        [](const Inputs& x) { return ops::clamp(ops::permute(x[0], {2, 0, 1}), 0.05, std::nullopt); });
  t.add("clamp max only", "[5] max -0.25", [] { return Inputs{away_from(randn({5}, 375), {-0.25})}; },
        [](const Inputs& x) { return ops::clamp(x[0], std::nullopt, -0.25); });
  t.add("hardtanh", "[3, 4] (N(0, 4)) to [-1, 1]",
        [] { return Inputs{away_from(ops::mul_scalar(randn({3, 4}, 377), 2.0), {-1.0, 1.0})}; },
        [](const Inputs& x) { return ops::hardtanh(x[0]); });
}

// Unary math: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_unary_misuse_rows() {
  const Tensor m = f32({2, 3});
  using namespace ops;
  return {
    {"exp", {m}, [](const Args& a) { exp(a[0]); }},
    {"log", {positive({2, 3})}, [](const Args& a) { log(a[0]); }},
    {"sqrt", {positive({2, 3})}, [](const Args& a) { sqrt(a[0]); }},
    {"pow", {m}, [](const Args& a) { pow(a[0], 2.0); }},
    {"tanh", {m}, [](const Args& a) { tanh(a[0]); }},
    {"relu", {m}, [](const Args& a) { relu(a[0]); }},
    {"gelu", {m}, [](const Args& a) { gelu(a[0]); }},
    {"gelu", {m}, [](const Args& a) { gelu(a[0], GeluApproximate::tanh); }},
    {"abs", {m}, [](const Args& a) { abs(a[0]); }},
    {"sigmoid", {m}, [](const Args& a) { sigmoid(a[0]); }},
    {"clamp", {m}, [](const Args& a) { clamp(a[0], -0.5, 0.5); }},
    {"hardtanh", {m}, [](const Args& a) { hardtanh(a[0], -0.5, 0.5); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_unary_differential_calls() {
  using namespace ops;
  return {
      {"pow_scalar", [](const Inputs& x, const json& p) { return Outputs{pow(x[0], p["s"].get<double>())}; }},
      {"exp", unary_call([](const Tensor& t) { return exp(t); })},
      {"log", unary_call([](const Tensor& t) { return log(t); })},
      {"sqrt", unary_call([](const Tensor& t) { return sqrt(t); })},
      {"tanh", unary_call([](const Tensor& t) { return tanh(t); })},
      {"relu", unary_call([](const Tensor& t) { return relu(t); })},
      {"gelu", [](const Inputs& x, const json& p) { return Outputs{gelu(x[0], gelu_form(p))}; }},
      {"abs", unary_call([](const Tensor& t) { return abs(t); })},
      {"sigmoid", unary_call([](const Tensor& t) { return sigmoid(t); })},
      {"clamp",
       [](const Inputs& x, const json& p) {
         return Outputs{clamp(x[0], optional_number(p["min"]), optional_number(p["max"]))};
       }},
      {"hardtanh",
       [](const Inputs& x, const json& p) {
         return Outputs{hardtanh(x[0], p["min_val"].get<double>(), p["max_val"].get<double>())};
       }},
  };
}

// Argument values PyTorch refuses too (clamp with neither bound; hardtanh with min_val > max_val).
std::vector<RefusedCall> ops_unary_refused_calls() {
  using namespace ops;
  return {
      {"clamp", [] { clamp(Tensor::zeros({2}), std::nullopt, std::nullopt); }, "clamp: give"},
      {"hardtanh", [] { hardtanh(Tensor::zeros({2}), 1.0, -1.0); }, "hardtanh: min_val 1 is greater than max_val -1"},
  };
}

const RegisterChecks ops_unary_registered({.name = "framework/ops/unary",
                                           .gradcheck_rows = {unary_rows},
                                           .misuse_rows = ops_unary_misuse_rows,
                                           .differential_calls = ops_unary_differential_calls,
                                           .derivatives = ops_unary_derivatives,
                                           .refused_calls = ops_unary_refused_calls});

} // namespace
} // namespace headgrad::checks
