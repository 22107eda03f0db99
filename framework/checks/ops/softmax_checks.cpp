// softmax_checks.cpp - the checks of the softmax family (softmax.cpp):
// softmax, log_softmax, logsumexp.
// Registered as "framework/ops/softmax" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_softmax_derivatives = R"(
250 | softmax (last axis; a 0-d x is one row of one element)
    | `y_i = e^{x_i − m} / Σ_j e^{x_j − m}`, `m` the row max; a NaN or `+inf` in the row makes it all NaN
    | `dx_k += y_k (dy_k − Σ_i dy_i y_i)` | y | `softmax.cpp` · `softmax`; kernels `softmax_forward`, `softmax_backward` (book loops in `masked_softmax.cpp`; engine `engine/kernels/row_softmax.hpp`)
260 | log_softmax | `y_i = (x_i − m) − log Σ_j e^{x_j − m}` (PyTorch's order: exact to rounding at large logits)
    | `dx_k += dy_k − e^{y_k} Σ_i dy_i` (what the gradients of the composed ops add up to) | the composed ops'
    | `softmax.cpp` · `log_softmax` (composed: sub, max, exp, sum, log)
270 | softmax, log_softmax (any axis) | the same along the middle axis of (outer, len, inner)
    | the same VJPs along that axis | the last-axis op's | `softmax.cpp` · `softmax_along` (transpose, the last-axis
      op, transpose back)
280 | logsumexp
    | `y = log Σ_k e^{x_k}` over axes, shifted by the row max (by 0 where that max is ±inf: `−inf` for an all
      `−inf` row, `+inf` with a `+inf`) | `dx += dy ⊙ e^{x − y}` (broadcast) | x, y
    | `softmax.cpp` · `logsumexp` (its loop in the op)
)";

void softmax_rows(GradcheckRows& t) {
  t.add("softmax 1-D", "[5]", [] { return Inputs{randn({5}, 500)}; }, [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax 2-D", "[3, 4]", [] { return Inputs{randn({3, 4}, 501)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax 3-D", "[2, 3, 4]", [] { return Inputs{randn({2, 3, 4}, 502)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax of a transpose view", "[4, 3]^T", [] { return Inputs{randn({4, 3}, 503)}; },
        [](const Inputs& x) { return ops::softmax(ops::transpose(x[0], 0, 1)); });
  t.add("softmax large logits", "[2, 3] + 1000", [] { return Inputs{ops::add_scalar(randn({2, 3}, 504), 1000.0)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax one column", "[3, 1]", [] { return Inputs{randn({3, 1}, 505)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("log_softmax 1-D", "[5]", [] { return Inputs{randn({5}, 510)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0]); });
  t.add("log_softmax 2-D", "[3, 4]", [] { return Inputs{randn({3, 4}, 511)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0]); });
  t.add("log_softmax 3-D", "[2, 3, 4]", [] { return Inputs{randn({2, 3, 4}, 512)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0]); });
  t.add("log_softmax of a permuted view", "[3, 2, 4] permute(1, 2, 0)", [] { return Inputs{randn({3, 2, 4}, 513)}; },
        [](const Inputs& x) { return ops::log_softmax(ops::permute(x[0], {1, 2, 0})); });
  t.add("softmax axis 0", "[4, 3] axis 0", [] { return Inputs{randn({4, 3}, 520)}; },
        [](const Inputs& x) { return ops::softmax(x[0], 0); });
  t.add("softmax middle axis of a transpose view", "[2, 4, 3]^T(0, 2) axis 1", [] { return Inputs{randn({2, 4, 3}, 521)}; },
        [](const Inputs& x) { return ops::softmax(ops::transpose(x[0], 0, 2), 1); });
  t.add("softmax axis -1 (the row kernel)", "[3, 4] axis -1", [] { return Inputs{randn({3, 4}, 522)}; },
        [](const Inputs& x) { return ops::softmax(x[0], -1); });
  t.add("log_softmax axis 0", "[5, 2] axis 0", [] { return Inputs{randn({5, 2}, 523)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0], 0); });
  t.add("log_softmax middle axis, used twice", "[2, 3, 4] axis 1", [] { return Inputs{randn({2, 3, 4}, 524)}; },
        [](const Inputs& x) {
          Tensor y = ops::log_softmax(x[0], 1);
          return ops::mul(y, y);
        });
  t.add("logsumexp last axis", "[3, 4] axis -1", [] { return Inputs{randn({3, 4}, 525)}; },
        [](const Inputs& x) { return ops::logsumexp(x[0], {-1}); });
  t.add("logsumexp two axes keepdim of a view", "[3, 2, 4] permute(2, 0, 1) axes (0, 2) keepdim",
        [] { return Inputs{randn({3, 2, 4}, 526)}; },
        [](const Inputs& x) { return ops::logsumexp(ops::permute(x[0], {2, 0, 1}), {0, 2}, true); });
  t.add("logsumexp all axes, large values", "[2, 3] + 500", [] { return Inputs{ops::add_scalar(randn({2, 3}, 527), 500.0)}; },
        [](const Inputs& x) { return ops::logsumexp(x[0], {}); });
}

// Softmax family: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_softmax_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"softmax", {x}, [](const Args& a) { softmax(a[0]); }},
    {"softmax", {x}, [](const Args& a) { softmax(a[0], 1); }},
    {"log_softmax", {x}, [](const Args& a) { log_softmax(a[0]); }},
    {"log_softmax", {x}, [](const Args& a) { log_softmax(a[0], 0); }},
    {"logsumexp", {x}, [](const Args& a) { logsumexp(a[0], {1}); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_softmax_differential_calls() {
  using namespace ops;
  return {
      {"softmax",
       [](const Inputs& x, const json& p) { return Outputs{p["axis"].is_null() ? softmax(x[0]) : softmax(x[0], p["axis"])}; }},
      {"log_softmax",
       [](const Inputs& x, const json& p) {
         return Outputs{p["axis"].is_null() ? log_softmax(x[0]) : log_softmax(x[0], p["axis"])};
       }},
      {"logsumexp",
       [](const Inputs& x, const json& p) { return Outputs{logsumexp(x[0], dims_of(p["axes"]), p["keepdim"])}; }},
  };
}

const RegisterChecks ops_softmax_registered({"framework/ops/softmax", {softmax_rows}, ops_softmax_misuse_rows,
                                             ops_softmax_differential_calls, ops_softmax_derivatives});

} // namespace
} // namespace headgrad::checks
