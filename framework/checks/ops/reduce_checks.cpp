// reduce_checks.cpp - gradient-check and misuse rows of the reductions (reduce.cpp): sum, mean,
// var, std, sum_to.
// Registered as "framework/ops/reduce" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

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

const RegisterChecks ops_reduce_registered({"framework/ops/reduce", {reduce_rows}, ops_reduce_misuse_rows});

} // namespace
} // namespace headgrad::checks
