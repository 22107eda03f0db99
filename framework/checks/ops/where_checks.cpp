// where_checks.cpp - the checks of the selections by a bool mask (where.cpp):
// where, masked_fill.
// Registered as "framework/ops/where" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_where_derivatives = R"(
60 | where | `y = cond ? a : b` | `da += Σ where(cond, dy, 0)`, `db += Σ where(cond, 0, dy)` | cond
    | `where.cpp` · `where`; loop `map.hpp` · `where_broadcast`
70 | masked_fill | `y = mask ? v : x` | `dx += where(mask, 0, dy)` | mask | `where.cpp` · `masked_fill`
)";

// ---- selection by a mask ---------------------------------------------------------------------------
void where_rows(GradcheckRows& t) {
  t.add("where broadcast condition", "where([2, 1] mask, [2, 3], [3])",
        [] { return Inputs{randn({2, 3}, 196), randn({3}, 197)}; },
        [](const Inputs& x) {
          return ops::where(Tensor::from({1, 0}, {2, 1}, DType::bool8), x[0], x[1]);
        });
  t.add("where same tensor on both sides of a transpose view", "where([3, 2] mask, x^T, x^T * 2)",
        [] { return Inputs{randn({2, 3}, 198)}; },
        [](const Inputs& x) {
          Tensor v = ops::transpose(x[0], 0, 1);
          return ops::where(Tensor::from({1, 0, 0, 1, 1, 1}, {3, 2}, DType::bool8), v, ops::mul_scalar(v, 2.0));
        });
  t.add("masked_fill broadcast mask", "[2, 3] mask [3]", [] { return Inputs{randn({2, 3}, 199)}; },
        [](const Inputs& x) { return ops::masked_fill(x[0], Tensor::from({0, 1, 0}, {3}, DType::bool8), -2.5); });
}

// Selection by a mask: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_where_misuse_rows() {
  const Tensor m = f32({2, 3}), v = f32({3});
  const Tensor mask = bools({1, 0, 1, 0, 1, 0}, {2, 3});
  using namespace ops;
  return {
    {"where", {mask, m, v}, [](const Args& a) { where(a[0], a[1], a[2]); }},
    {"masked_fill", {m, mask}, [](const Args& a) { masked_fill(a[0], a[1], 0.0); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_where_differential_calls() {
  using namespace ops;
  return {
      {"where", [](const Inputs& x, const json&) { return Outputs{where(x[0], x[1], x[2])}; }},
      {"masked_fill", [](const Inputs& x, const json& p) { return Outputs{masked_fill(x[0], x[1], p["value"])}; }},
  };
}

const RegisterChecks ops_where_registered({"framework/ops/where", {where_rows}, ops_where_misuse_rows,
                                           ops_where_differential_calls, ops_where_derivatives});

} // namespace
} // namespace headgrad::checks
