// elementwise_checks.cpp - the checks of the elementwise arithmetic
// (elementwise.cpp): add, sub, mul, div and pow on two tensors (broadcasting), neg and the scalar forms.
// Registered as "framework/ops/elementwise" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_elementwise_derivatives = R"(
10 | add | `y = a + b` | `da += Σ_bcast dy`, `db += Σ_bcast dy` | — | `elementwise.cpp` · `add`
20 | sub | `y = a − b` | `da += Σ dy`, `db −= Σ dy` | — | `elementwise.cpp` · `sub`
30 | mul | `y = a ⊙ b` | `da += Σ dy ⊙ b`, `db += Σ dy ⊙ a` | a, b | `elementwise.cpp` · `mul`
40 | div | `y = a / b`
    | `da += Σ dy / b`, `db −= Σ dy ⊙ ((a / b) / b)` (PyTorch's form: `b²` overflows or goes subnormal long
      before the quotient) | b, y | `elementwise.cpp` · `div`
50 | pow (tensor exponent) | `y = aᵇ`
    | `da += Σ dy ⊙ b aᵇ⁻¹` (0 where `b = 0`), `db += Σ dy ⊙ y ln a` (0 where `a = 0` and `b ≥ 0`) | a, b, y
    | `elementwise.cpp` · `pow`
80 | neg, add_scalar, mul_scalar, rsub_scalar | `y = αx + β` | `dx += α dy` | α | `elementwise.cpp` · `affine`
90 | rdiv_scalar | `y = s / x` | `dx −= dy ⊙ (y / x)` | x, y | `elementwise.cpp` · `rdiv_scalar`
)";

template <typename Op> void binary_rows(GradcheckRows& t, const char* name, const char* sym, Op op, bool div_like) {
  const std::uint64_t base = 100 + 20 * static_cast<std::uint64_t>(name[0] + name[1]);
  // The second operand of div is kept away from 0 (it is a divisor).
  auto rhs = [div_like](const Dims& s, std::uint64_t seed) { return div_like ? positive(s, seed) : randn(s, seed); };
  const std::string n(name), sy(sym);
  t.add(n + " same shape", "[2, 3] " + sy + " [2, 3]", [=] { return Inputs{randn({2, 3}, base), rhs({2, 3}, base + 1)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " broadcast both operands", "[2, 1, 3] " + sy + " [4, 1]",
        [=] { return Inputs{randn({2, 1, 3}, base + 2), rhs({4, 1}, base + 3)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " size-1 dims", "[1, 3] " + sy + " [3, 1]", [=] { return Inputs{randn({1, 3}, base + 4), rhs({3, 1}, base + 5)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " scalar operand", "[2, 3] " + sy + " []", [=] { return Inputs{randn({2, 3}, base + 6), rhs({}, base + 7)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " non-contiguous operands", "[3, 2]^T " + sy + " [4, 3, 2] permute(0, 2, 1)",
        [=] { return Inputs{randn({3, 2}, base + 8), rhs({4, 3, 2}, base + 9)}; },
        [op](const Inputs& x) { return op(ops::transpose(x[0], 0, 1), ops::permute(x[1], {0, 2, 1})); });
  t.add(n + " same tensor twice", "x " + sy + " x, x [2, 3]",
        [=] { return Inputs{div_like ? positive({2, 3}, base + 10) : randn({2, 3}, base + 10)}; },
        [op](const Inputs& x) { return op(x[0], x[0]); });
}

void elementwise_rows(GradcheckRows& t) {
  binary_rows(t, "add", "+", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); }, false);
  binary_rows(t, "sub", "-", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); }, false);
  binary_rows(t, "mul", "*", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, false);
  binary_rows(t, "div", "/", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); }, true);
  // A broadcast operand whose gradient buffer must sum over the broadcast axis, in a sub whose
  // second operand is a slice (non-zero offset).
  t.add("sub broadcast slice operand", "[3, 4] - [5, 4][1:2]", [] { return Inputs{randn({3, 4}, 190), randn({5, 4}, 191)}; },
        [](const Inputs& x) { return ops::sub(x[0], ops::slice(x[1], 0, 1, 2)); });

  // pow with a tensor exponent: the base positive (a fractional power of a negative is NaN)
  t.add("pow tensor exponent, broadcast", "[2, 3] ^ [3] (base positive)",
        [] { return Inputs{positive({2, 3}, 192), randn({3}, 193)}; },
        [](const Inputs& x) { return ops::pow(x[0], x[1]); });
  t.add("pow same tensor as base and exponent", "x ^ x, x [4] (positive)", [] { return Inputs{positive({4}, 194)}; },
        [](const Inputs& x) { return ops::pow(x[0], x[0]); });
  t.add("pow integer exponents of a negative base", "[2, 3] ^ {2, 3, 0} (transpose view)",
        [] { return Inputs{randn({3, 2}, 195)}; },
        [](const Inputs& x) {
          return ops::pow(ops::transpose(x[0], 0, 1), Tensor::from({2, 3, 0}, {3}, x[0].dtype()));
        });
  t.add("pow zero base: the exponent's gradient is 0 there", "[0, 0.5, 2] ^ [1.5, 2, 3] (exponent checked)",
        [] { return Inputs{Tensor::from({1.5, 2, 3}, {3}, DType::f64)}; },
        [](const Inputs& x) { return ops::pow(Tensor::from({0, 0.5, 2}, {3}, x[0].dtype()), x[0]); });

  t.add("neg", "[2, 3]", [] { return Inputs{randn({2, 3}, 200)}; }, [](const Inputs& x) { return ops::neg(x[0]); });
  t.add("neg of a transpose view", "[3, 2]^T", [] { return Inputs{randn({3, 2}, 201)}; },
        [](const Inputs& x) { return ops::neg(ops::transpose(x[0], 0, 1)); });
  t.add("add_scalar", "[2, 3] + 1.5", [] { return Inputs{randn({2, 3}, 210)}; },
        [](const Inputs& x) { return ops::add_scalar(x[0], 1.5); });
  t.add("add_scalar of a permuted view, used twice", "[2, 3, 4] permute(1, 2, 0) + 0.25",
        [] { return Inputs{randn({2, 3, 4}, 211)}; },
        [](const Inputs& x) {
          Tensor y = ops::add_scalar(ops::permute(x[0], {1, 2, 0}), 0.25);
          return ops::mul(y, y);
        });
  t.add("mul_scalar", "[4] * -2.5", [] { return Inputs{randn({4}, 220)}; },
        [](const Inputs& x) { return ops::mul_scalar(x[0], -2.5); });
  t.add("mul_scalar scalar tensor", "[] * 3", [] { return Inputs{randn({}, 221)}; },
        [](const Inputs& x) { return ops::mul_scalar(x[0], 3.0); });
  t.add("rsub_scalar", "2 - [3, 2]", [] { return Inputs{randn({3, 2}, 230)}; },
        [](const Inputs& x) { return ops::rsub_scalar(x[0], 2.0); });
  t.add("rsub_scalar of a transpose view", "1 - [2, 3]^T", [] { return Inputs{randn({2, 3}, 231)}; },
        [](const Inputs& x) { return ops::rsub_scalar(ops::transpose(x[0], 0, 1), 1.0); });
  t.add("rdiv_scalar", "3 / [2, 3] (positive)", [] { return Inputs{positive({2, 3}, 240)}; },
        [](const Inputs& x) { return ops::rdiv_scalar(x[0], 3.0); });
  t.add("rdiv_scalar of a transpose view, negative numerator", "-1.5 / [3, 2]^T", [] { return Inputs{positive({3, 2}, 241)}; },
        [](const Inputs& x) { return ops::rdiv_scalar(ops::transpose(x[0], 0, 1), -1.5); });
}

// A composition the models rely on.
void layer_norm_composite_rows(GradcheckRows& t) {
  // mean and variance over the last axis (layer-norm-like), x used on several paths.
  t.add("sub mean / sqrt var composite", "[3, 5]", [] { return Inputs{randn({3, 5}, 803)}; },
        [](const Inputs& x) {
          Tensor c = ops::sub(x[0], ops::mean(x[0], {-1}, true));
          Tensor var = ops::mean(ops::mul(c, c), {-1}, true);
          return ops::div(c, ops::sqrt(ops::add_scalar(var, 1e-5)));
        });
}

// Elementwise arithmetic: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_elementwise_misuse_rows() {
  const Tensor m = f32({2, 3}), v = f32({3});
  using namespace ops;
  return {
    {"add", {m, v}, [](const Args& a) { add(a[0], a[1]); }},
    {"sub", {m, v}, [](const Args& a) { sub(a[0], a[1]); }},
    {"mul", {m, v}, [](const Args& a) { mul(a[0], a[1]); }},
    {"div", {m, v}, [](const Args& a) { div(a[0], a[1]); }},
    {"pow", {positive({2, 3}), v}, [](const Args& a) { pow(a[0], a[1]); }},
    {"neg", {m}, [](const Args& a) { neg(a[0]); }},
    {"add_scalar", {m}, [](const Args& a) { add_scalar(a[0], 1.0); }},
    {"mul_scalar", {m}, [](const Args& a) { mul_scalar(a[0], 2.0); }},
    {"rsub_scalar", {m}, [](const Args& a) { rsub_scalar(a[0], 1.0); }},
    {"rdiv_scalar", {positive({2, 3})}, [](const Args& a) { rdiv_scalar(a[0], 1.0); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_elementwise_differential_calls() {
  using namespace ops;
  return {
      {"add", binary_call([](const Tensor& a, const Tensor& b) { return add(a, b); })},
      {"sub", binary_call([](const Tensor& a, const Tensor& b) { return sub(a, b); })},
      {"mul", binary_call([](const Tensor& a, const Tensor& b) { return mul(a, b); })},
      {"div", binary_call([](const Tensor& a, const Tensor& b) { return div(a, b); })},
      {"pow", binary_call([](const Tensor& a, const Tensor& b) { return pow(a, b); })},
      {"add_scalar", [](const Inputs& x, const json& p) { return Outputs{add_scalar(x[0], p["s"])}; }},
      {"mul_scalar", [](const Inputs& x, const json& p) { return Outputs{mul_scalar(x[0], p["s"])}; }},
      {"rsub_scalar", [](const Inputs& x, const json& p) { return Outputs{rsub_scalar(x[0], p["s"])}; }},
      {"rdiv_scalar", [](const Inputs& x, const json& p) { return Outputs{rdiv_scalar(x[0], p["s"])}; }},
      {"neg", unary_call([](const Tensor& t) { return neg(t); })},
  };
}

const RegisterChecks ops_elementwise_registered({"framework/ops/elementwise", {elementwise_rows, layer_norm_composite_rows},
                                                 ops_elementwise_misuse_rows, ops_elementwise_differential_calls,
                                                 ops_elementwise_derivatives});

} // namespace
} // namespace headgrad::checks
