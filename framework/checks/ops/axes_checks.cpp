// axes_checks.cpp - the checks of the ops that add, remove, repeat and
// split axes (axes.cpp): expand, squeeze, unsqueeze, stack, split, chunk.
// Registered as "framework/ops/axes" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_axes_derivatives = R"(
430 | expand | view repeating size-1 axes and adding leading ones (stride 0) | `dx += Σ dy` over the repeats | —
    | `axes.cpp` · `expand`
440 | squeeze, unsqueeze | view without / with size-1 axes | `dx += dy` read in x's shape | —
    | `axes.cpp` · `size_one_view`
)";

void axes_rows(GradcheckRows& t) {
  t.add("expand size-1 axes and a new leading axis", "[3, 1] -> [2, 3, 4]", [] { return Inputs{randn({3, 1}, 70)}; },
        [](const Inputs& x) { return ops::expand(x[0], {2, 3, 4}); });
  t.add("expand with -1 of a transpose view, then mul", "[1, 3]^T... [3, 1] -> [-1, 5] * [3, 5]",
        [] { return Inputs{randn({1, 3}, 71), randn({3, 5}, 72)}; },
        [](const Inputs& x) { return ops::mul(ops::expand(ops::transpose(x[0], 0, 1), {-1, 5}), x[1]); });
  t.add("squeeze every size-1 axis", "[1, 3, 1, 2] -> [3, 2]", [] { return Inputs{randn({1, 3, 1, 2}, 73)}; },
        [](const Inputs& x) { return ops::squeeze(x[0]); });
  t.add("squeeze one axis of a permuted view", "[3, 1, 2] permute(2, 1, 0) axis 1",
        [] { return Inputs{randn({3, 1, 2}, 74)}; },
        [](const Inputs& x) { return ops::exp(ops::squeeze(ops::permute(x[0], {2, 1, 0}), 1)); });
  t.add("unsqueeze then broadcast", "[3] -> [3, 1] * [3, 4]", [] { return Inputs{randn({3}, 75), randn({3, 4}, 76)}; },
        [](const Inputs& x) { return ops::mul(ops::unsqueeze(x[0], -1), x[1]); });
  t.add("unsqueeze middle axis of a transpose view", "[2, 3]^T axis 1", [] { return Inputs{randn({2, 3}, 77)}; },
        [](const Inputs& x) { return ops::unsqueeze(ops::transpose(x[0], 0, 1), 1); });
  t.add("stack three on a new last axis", "3 x [2, 3] axis -1",
        [] { return Inputs{randn({2, 3}, 78), randn({2, 3}, 79), randn({2, 3}, 80)}; },
        [](const Inputs& x) { return ops::stack({x[0], x[1], x[2]}, -1); });
  t.add("stack the same tensor twice", "x, x [3] axis 0", [] { return Inputs{randn({3}, 81)}; },
        [](const Inputs& x) { return ops::stack({x[0], x[0]}, 0); });
  // split and chunk return pieces: joined again in reverse order, so each piece's gradient must
  // land back in its own place
  auto reversed = [](std::vector<Tensor> parts, int axis) { return ops::concat({parts.rbegin(), parts.rend()}, axis); };
  t.add("split by size, last piece shorter", "[5, 2] size 2 axis 0", [] { return Inputs{randn({5, 2}, 82)}; },
        [reversed](const Inputs& x) { return reversed(ops::split(x[0], 2, 0), 0); });
  t.add("split by sizes with an empty piece", "[2, 6] sizes (1, 0, 5) axis 1", [] { return Inputs{randn({2, 6}, 83)}; },
        [reversed](const Inputs& x) { return reversed(ops::split(x[0], std::vector<std::int64_t>{1, 0, 5}, 1), 1); });
  t.add("chunk into fewer pieces than asked", "[6, 2] 4 chunks -> 3", [] { return Inputs{randn({6, 2}, 84)}; },
        [reversed](const Inputs& x) { return reversed(ops::chunk(x[0], 4, 0), 0); });
  t.add("chunk of a transpose view", "[3, 5]^T 2 chunks axis 0", [] { return Inputs{randn({3, 5}, 85)}; },
        [reversed](const Inputs& x) { return reversed(ops::chunk(ops::transpose(x[0], 0, 1), 2, 0), 0); });
}

// Axes: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_axes_misuse_rows() {
  const Tensor m = f32({2, 3});
  using namespace ops;
  return {
    {"expand", {f32({1, 3})}, [](const Args& a) { expand(a[0], {2, 3}); }},
    {"squeeze", {f32({1, 3})}, [](const Args& a) { squeeze(a[0]); }},
    {"squeeze", {f32({1, 3})}, [](const Args& a) { squeeze(a[0], 0); }},
    {"unsqueeze", {m}, [](const Args& a) { unsqueeze(a[0], -1); }},
    {"stack", {m, m}, [](const Args& a) { stack({a[0], a[1]}, 0); }},
    {"split", {m}, [](const Args& a) { split(a[0], 2, 1); }},
    {"split", {m}, [](const Args& a) { split(a[0], std::vector<std::int64_t>{1, 2}, 1); }},
    {"chunk", {m}, [](const Args& a) { chunk(a[0], 2, 1); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_axes_differential_calls() {
  using namespace ops;
  return {
      {"stack", [](const Inputs& x, const json& p) { return Outputs{stack(x, p["axis"])}; }},
      {"split",
       [](const Inputs& x, const json& p) {
         return p["size"].is_null() ? split(x[0], p["sizes"].get<std::vector<std::int64_t>>(), p["axis"])
                                    : split(x[0], p["size"].get<std::int64_t>(), p["axis"]);
       }},
      {"chunk", [](const Inputs& x, const json& p) { return chunk(x[0], p["chunks"].get<std::int64_t>(), p["axis"]); }},
      {"expand", [](const Inputs& x, const json& p) { return Outputs{expand(x[0], dims_of(p["shape"]))}; }},
      {"squeeze",
       [](const Inputs& x, const json& p) { return Outputs{p["axis"].is_null() ? squeeze(x[0]) : squeeze(x[0], p["axis"])}; }},
      {"unsqueeze", [](const Inputs& x, const json& p) { return Outputs{unsqueeze(x[0], p["axis"])}; }},
  };
}

// stack is unsqueeze + concat, split and chunk are slices: autograd composes their gradients
const RegisterChecks ops_axes_registered(
    {.name = "framework/ops/axes", .gradcheck_rows = {axes_rows}, .misuse_rows = ops_axes_misuse_rows,
     .differential_calls = ops_axes_differential_calls, .derivatives = ops_axes_derivatives,
     .composite = {"stack", "split", "chunk"}});

} // namespace
} // namespace headgrad::checks
