// reduce_checks.cpp - the checks of the reductions (reduce.cpp): sum, mean,
// var, std, sum_to.
// Registered as "framework/ops/reduce" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_reduce_derivatives = R"(
210 | sum_to / sum / mean | `y_j = Σ_{i→j} x_i` (mean: `/ count`, count = the product of the reduced sizes)
    | `dx_i += dy_j` (broadcast back; mean: `dx_i += dy_j / count`) | shapes
    | `reduce.cpp` · `sum_to`, `sum`, `mean` (= `sum`, then `mul_scalar(1 / count)`); `sum` of int64/bool is an
      int64 count with no gradient
220 | var, std
    | `v = Σ_k (x_k − m)² / max(0, N − c)`, `m` the mean, `c` the correction (Bessel's 1 by default); `y = v` or
      `√v` (accumulated in double, rooted before rounding)
    | `g = dy` (var) or `where(y = 0, 0, dy / 2y)` (std); `dx += (2 / (N − c)) g (x − m)` with `N − c` not
      clamped (PyTorch's `var_backward`: a correction above N gives a finite gradient where the forward is
      inf) — the term through `m` sums to zero and is left out, as PyTorch does | m, y
    | `reduce.cpp` · `moment`; loop `reduce.cpp` · `mean_var_rows`
)";

void reduce_rows(GradcheckRows& t) {
  t.add("sum all axes", "[2, 3, 4] -> []", [] { return Inputs{randn({2, 3, 4}, 400)}; },
        [](const Inputs& x) { return ops::sum(x[0]); });
  t.add("sum one axis", "[2, 3, 4] axis 1", [] { return Inputs{randn({2, 3, 4}, 401)}; },
        [](const Inputs& x) { return ops::sum(x[0], {1}); });
  t.add("sum several axes", "[2, 3, 4] axes (0, 2)", [] { return Inputs{randn({2, 3, 4}, 402)}; },
        [](const Inputs& x) { return ops::sum(x[0], {0, 2}); });
  t.add("sum keepdim", "[2, 3, 4] axes (0, 2) keepdim", [] { return Inputs{randn({2, 3, 4}, 403)}; },
        [](const Inputs& x) { return ops::sum(x[0], {0, 2}, true); });
  t.add("sum negative axis", "[3, 4] axis -1", [] { return Inputs{randn({3, 4}, 404)}; },
        [](const Inputs& x) { return ops::sum(x[0], {-1}); });
  t.add("sum of a transpose view keepdim", "[3, 4]^T axis 0 keepdim", [] { return Inputs{randn({3, 4}, 405)}; },
        [](const Inputs& x) { return ops::sum(ops::transpose(x[0], 0, 1), {0}, true); });
  t.add("sum over a size-1 axis", "[3, 1, 2] axis 1", [] { return Inputs{randn({3, 1, 2}, 406)}; },
        [](const Inputs& x) { return ops::sum(x[0], {1}); });
  t.add("mean all axes", "[3, 4] -> []", [] { return Inputs{randn({3, 4}, 410)}; },
        [](const Inputs& x) { return ops::mean(x[0]); });
  t.add("mean one axis keepdim", "[2, 3, 4] axis 2 keepdim", [] { return Inputs{randn({2, 3, 4}, 411)}; },
        [](const Inputs& x) { return ops::mean(x[0], {2}, true); });
  t.add("mean several axes, negative", "[2, 3, 4] axes (-1, 0)", [] { return Inputs{randn({2, 3, 4}, 412)}; },
        [](const Inputs& x) { return ops::mean(x[0], {-1, 0}); });
  t.add("mean of a permuted view", "[2, 3, 4] permute(2, 0, 1) axis 1", [] { return Inputs{randn({2, 3, 4}, 413)}; },
        [](const Inputs& x) { return ops::mean(ops::permute(x[0], {2, 0, 1}), {1}); });
  t.add("var one axis", "[3, 5] axis 1", [] { return Inputs{randn({3, 5}, 435)}; },
        [](const Inputs& x) { return ops::var(x[0], {1}); });
  t.add("var all axes, correction 0, of a view", "[4, 3]^T", [] { return Inputs{randn({4, 3}, 436)}; },
        [](const Inputs& x) { return ops::var(ops::transpose(x[0], 0, 1), {}, 0); });
  t.add("std several axes keepdim", "[2, 3, 4] axes (0, 2) keepdim", [] { return Inputs{randn({2, 3, 4}, 437)}; },
        [](const Inputs& x) { return ops::std(x[0], {0, 2}, 1, true); });
  t.add("std single axis", "[4, 2] axis 0", [] { return Inputs{randn({4, 2}, 438)}; },
        [](const Inputs& x) { return ops::std(x[0], {0}); });

  t.add("sum_to trailing broadcast", "[2, 3, 4] -> [3, 1]", [] { return Inputs{randn({2, 3, 4}, 430)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {3, 1}); });
  t.add("sum_to leading and middle", "[2, 3, 4] -> [2, 1, 4]", [] { return Inputs{randn({2, 3, 4}, 431)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {2, 1, 4}); });
  t.add("sum_to a scalar", "[3, 2] -> []", [] { return Inputs{randn({3, 2}, 432)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {}); });
  t.add("sum_to same shape (identity)", "[2, 3] -> [2, 3]", [] { return Inputs{randn({2, 3}, 433)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {2, 3}); });
  t.add("sum_to of a transpose view", "[4, 3]^T -> [1, 4]", [] { return Inputs{randn({4, 3}, 434)}; },
        [](const Inputs& x) { return ops::sum_to(ops::transpose(x[0], 0, 1), {1, 4}); });
}

// Reductions: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_reduce_misuse_rows() {
  const Tensor x = f32({2, 3, 4}), m = f32({2, 3});
  using namespace ops;
  return {
    {"sum", {x}, [](const Args& a) { sum(a[0], {1}); }},
    {"mean", {x}, [](const Args& a) { mean(a[0], {1, 2}, true); }},
    {"var", {x}, [](const Args& a) { var(a[0], {2}); }},
    {"std", {x}, [](const Args& a) { ops::std(a[0], {}, 0); }},
    {"sum_to", {m}, [](const Args& a) { sum_to(a[0], {1, 3}); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_reduce_differential_calls() {
  using namespace ops;
  return {
      {"sum", [](const Inputs& x, const json& p) { return Outputs{sum(x[0], dims_of(p["axes"]), p["keepdim"])}; }},
      {"mean", [](const Inputs& x, const json& p) { return Outputs{mean(x[0], dims_of(p["axes"]), p["keepdim"])}; }},
      {"var",
       [](const Inputs& x, const json& p) {
         return Outputs{var(x[0], dims_of(p["axes"]), p["correction"].get<std::int64_t>(), p["keepdim"])};
       }},
      {"std",
       [](const Inputs& x, const json& p) {
         return Outputs{ops::std(x[0], dims_of(p["axes"]), p["correction"].get<std::int64_t>(), p["keepdim"])};
       }},
      {"sum_to", [](const Inputs& x, const json& p) { return Outputs{sum_to(x[0], dims_of(p["shape"]))}; }},
  };
}

const RegisterChecks ops_reduce_registered({"framework/ops/reduce", {reduce_rows}, ops_reduce_misuse_rows,
                                            ops_reduce_differential_calls, ops_reduce_derivatives});

} // namespace
} // namespace headgrad::checks
