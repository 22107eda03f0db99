// extrema_checks.cpp - the checks of the extrema (extrema.cpp): max, min,
// max_with_indices, min_with_indices, topk; argmax and argmin (not differentiable) have misuse rows.
// Registered as "framework/ops/extrema" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/compare.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_extrema_derivatives = R"(
230 | max, min, max_with_indices, min_with_indices (axis)
    | `y = max_k x_k` (min: `min_k`); a NaN is both, at its first index
    | `dx[index] += dy` (the first argmax / argmin; ties to the first index) | indices
    | `extrema.cpp` · `extreme`; loops `extrema.cpp` · `arg_reduce`, `scatter.hpp` ·
      `gather_add`
240 | topk | the k largest (or smallest) along an axis, best first, ties to the lower index, NaN ranked largest
    | `dx[index_j] += dy_j` | indices
    | `extrema.cpp` · `topk`; loops `extrema.cpp` · `topk`, `scatter.hpp` · `gather_add`
)";

// ---- extrema: the gradient goes to the selected element (inputs distinct, so no tie flips) -------
void extrema_rows(GradcheckRows& t) {
  t.add("max last axis", "[3, 5] axis -1", [] { return Inputs{distinct({3, 5}, 420)}; },
        [](const Inputs& x) { return ops::max(x[0], -1); });
  t.add("max axis 0 keepdim", "[4, 3] axis 0 keepdim", [] { return Inputs{distinct({4, 3}, 421)}; },
        [](const Inputs& x) { return ops::max(x[0], 0, true); });
  t.add("max middle axis", "[2, 4, 3] axis 1", [] { return Inputs{distinct({2, 4, 3}, 422)}; },
        [](const Inputs& x) { return ops::max(x[0], 1); });
  t.add("max of a transpose view", "[5, 3]^T axis 1", [] { return Inputs{distinct({5, 3}, 423)}; },
        [](const Inputs& x) { return ops::max(ops::transpose(x[0], 0, 1), 1); });
  t.add("min last axis", "[3, 5] axis -1", [] { return Inputs{distinct({3, 5}, 424)}; },
        [](const Inputs& x) { return ops::min(x[0], -1); });
  t.add("min of a transpose view keepdim", "[4, 3]^T axis 0 keepdim", [] { return Inputs{distinct({4, 3}, 425)}; },
        [](const Inputs& x) { return ops::min(ops::transpose(x[0], 0, 1), 0, true); });
  t.add("max_with_indices middle axis", "[2, 4, 3] axis 1", [] { return Inputs{distinct({2, 4, 3}, 426)}; },
        [](const Inputs& x) { return ops::max_with_indices(x[0], 1).values; });
  t.add("min_with_indices keepdim", "[3, 4] axis 0 keepdim", [] { return Inputs{distinct({3, 4}, 427)}; },
        [](const Inputs& x) { return ops::min_with_indices(x[0], 0, true).values; });
  t.add("topk largest along the last axis", "[3, 5] k 2", [] { return Inputs{distinct({3, 5}, 428)}; },
        [](const Inputs& x) { return ops::topk(x[0], 2).values; });
  t.add("topk smallest along a middle axis of a view", "[2, 3, 4] permute(0, 2, 1) k 3 axis 1",
        [] { return Inputs{distinct({2, 3, 4}, 429)}; },
        [](const Inputs& x) { return ops::topk(ops::permute(x[0], {0, 2, 1}), 3, 1, false).values; });
}

// Extrema: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_extrema_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"max", {x}, [](const Args& a) { max(a[0], 1); }},
    {"min", {x}, [](const Args& a) { min(a[0], -1, true); }},
    {"max_with_indices", {x}, [](const Args& a) { max_with_indices(a[0], 0); }},
    {"min_with_indices", {x}, [](const Args& a) { min_with_indices(a[0], 2); }},
    {"topk", {x}, [](const Args& a) { topk(a[0], 2); }},
    {"argmax", {x}, [](const Args& a) { argmax(a[0], 1); }},
    {"argmin", {x}, [](const Args& a) { argmin(a[0], -1, true); }},
    {"argmax", {x}, [](const Args& a) { argmax(a[0]); }},
    {"argmin", {x}, [](const Args& a) { argmin(a[0]); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_extrema_differential_calls() {
  using namespace ops;
  return {
      {"max", [](const Inputs& x, const json& p) { return Outputs{max(x[0], p["axis"], p["keepdim"])}; }},
      {"min", [](const Inputs& x, const json& p) { return Outputs{min(x[0], p["axis"], p["keepdim"])}; }},
      {"max_with_indices",
       [](const Inputs& x, const json& p) { return values_indices(max_with_indices(x[0], p["axis"], p["keepdim"])); }},
      {"min_with_indices",
       [](const Inputs& x, const json& p) { return values_indices(min_with_indices(x[0], p["axis"], p["keepdim"])); }},
      {"argmax",
       [](const Inputs& x, const json& p) {
         return Outputs{p["axis"].is_null() ? argmax(x[0]) : argmax(x[0], p["axis"], p["keepdim"])};
       }},
      {"argmin",
       [](const Inputs& x, const json& p) {
         return Outputs{p["axis"].is_null() ? argmin(x[0]) : argmin(x[0], p["axis"], p["keepdim"])};
       }},
      {"topk",
       [](const Inputs& x, const json& p) {
         return values_indices(topk(x[0], p["k"].get<std::int64_t>(), p["axis"], p["largest"]));
       }},
  };
}

// argmax and argmin (compare.hpp) return indices
const RegisterChecks ops_extrema_registered(
    {.name = "framework/ops/extrema", .gradcheck_rows = {extrema_rows}, .misuse_rows = ops_extrema_misuse_rows,
     .differential_calls = ops_extrema_differential_calls, .derivatives = ops_extrema_derivatives,
     .no_gradient = {"argmax", "argmin"}});

} // namespace
} // namespace headgrad::checks
