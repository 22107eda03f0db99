// index_checks.cpp - the checks of the indexing ops (index.cpp):
// index_select, gather, embedding.
// Registered as "framework/ops/index" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_index_derivatives = R"(
470 | index_select (idx 1-D or 0-d; a 0-d x takes one index) / embedding | `y[o,k,i] = x[o, idx[k], i]`
    | `dx[o, idx[k], i] += dy[o,k,i]` (scatter-add) | idx
    | `index.cpp` · `index_select`, `embedding`; loop `scatter.hpp` · `index_add`
480 | gather (idx no larger than x off the axis: the leading part is read, through a slice)
    | `y[o,k,i] = x[o, idx[o,k,i], i]` | `dx[o, idx[o,k,i], i] += dy[o,k,i]` | idx
    | `index.cpp` · `gather`; loop `scatter.hpp` · `gather_add`
)";

void index_rows(GradcheckRows& t) {
  t.add("index_select axis 0, repeated indices", "[4, 3] idx [2, 0, 2, 3, 2]",
        [] { return Inputs{randn({4, 3}, 700), ints({2, 0, 2, 3, 2}, {5})}; },
        [](const Inputs& x) { return ops::index_select(x[0], 0, x[1]); });
  t.add("index_select middle axis", "[2, 5, 3] axis 1 idx [4, 1, 1]",
        [] { return Inputs{randn({2, 5, 3}, 701), ints({4, 1, 1}, {3})}; },
        [](const Inputs& x) { return ops::index_select(x[0], 1, x[1]); });
  t.add("index_select last axis of a transpose view", "[3, 4]^T axis -1 idx [0, 2, 0]",
        [] { return Inputs{randn({3, 4}, 702), ints({0, 2, 0}, {3})}; },
        [](const Inputs& x) { return ops::index_select(ops::transpose(x[0], 0, 1), -1, x[1]); });
  t.add("gather axis 1, repeats", "[3, 4] idx [3, 2]",
        [] { return Inputs{randn({3, 4}, 710), ints({3, 3, 0, 1, 2, 2}, {3, 2})}; },
        [](const Inputs& x) { return ops::gather(x[0], 1, x[1]); });
  t.add("gather axis 0", "[3, 2] idx [4, 2]",
        [] { return Inputs{randn({3, 2}, 711), ints({0, 1, 2, 2, 1, 1, 0, 0}, {4, 2})}; },
        [](const Inputs& x) { return ops::gather(x[0], 0, x[1]); });
  t.add("gather 3-D middle axis", "[2, 3, 2] idx [2, 2, 2]",
        [] { return Inputs{randn({2, 3, 2}, 712), ints({2, 0, 1, 1, 0, 0, 2, 2}, {2, 2, 2})}; },
        [](const Inputs& x) { return ops::gather(x[0], 1, x[1]); });
  t.add("gather of log_softmax (cross-entropy pattern)", "[4, 5] idx [4, 1]",
        [] { return Inputs{randn({4, 5}, 713), ints({1, 4, 0, 1}, {4, 1})}; },
        [](const Inputs& x) { return ops::gather(ops::log_softmax(x[0]), -1, x[1]); });
  t.add("embedding 1-D tokens, repeated", "W [5, 3], tokens [6]",
        [] { return Inputs{randn({5, 3}, 720), ints({1, 4, 1, 0, 1, 4}, {6})}; },
        [](const Inputs& x) { return ops::embedding(x[0], x[1]); });
  t.add("embedding 2-D tokens", "W [4, 2], tokens [2, 3]",
        [] { return Inputs{randn({4, 2}, 721), ints({3, 0, 3, 2, 2, 3}, {2, 3})}; },
        [](const Inputs& x) { return ops::embedding(x[0], x[1]); });
}

// Indexing: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_index_misuse_rows() {
  const Tensor x = f32({2, 3, 4}), m = f32({2, 3});
  using namespace ops;
  return {
    {"index_select", {x, ints({2, 0, 1, 2}, {4})}, [](const Args& a) { index_select(a[0], 1, a[1]); }},
    {"gather", {m, ints({0, 2, 1, 1, 0, 2}, {2, 3})}, [](const Args& a) { gather(a[0], 1, a[1]); }},
    {"embedding", {f32({5, 4}), ints({0, 4, 2}, {3})}, [](const Args& a) { embedding(a[0], a[1]); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_index_differential_calls() {
  using namespace ops;
  return {
      {"index_select", [](const Inputs& x, const json& p) { return Outputs{index_select(x[0], p["axis"], x[1])}; }},
      {"gather", [](const Inputs& x, const json& p) { return Outputs{gather(x[0], p["axis"], x[1])}; }},
      {"embedding", [](const Inputs& x, const json&) { return Outputs{embedding(x[0], x[1])}; }},
  };
}

const RegisterChecks ops_index_registered({"framework/ops/index", {index_rows}, ops_index_misuse_rows,
                                           ops_index_differential_calls, ops_index_derivatives});

} // namespace
} // namespace headgrad::checks
