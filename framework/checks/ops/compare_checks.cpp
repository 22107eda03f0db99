// compare_checks.cpp - misuse rows and differential calls of the comparisons and logical ops (compare.hpp), which
// have no gradient.
// Registered as "framework/ops/compare" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/compare.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Comparisons: one row per overload, the scalar forms first (a row's fn is the declared name;
// overloads share it).
std::vector<MisuseRow> ops_compare_misuse_rows() {
  const Tensor m = f32({2, 3}), v = f32({3});
  const Tensor mask = bools({1, 0, 1, 0, 1, 0}, {2, 3});
  using namespace ops;
  return {
    {"eq", {m}, [](const Args& a) { eq(a[0], 0.0); }},
    {"ne", {m}, [](const Args& a) { ne(a[0], 0.0); }},
    {"lt", {m}, [](const Args& a) { lt(a[0], 0.0); }},
    {"le", {m}, [](const Args& a) { le(a[0], 0.0); }},
    {"gt", {m}, [](const Args& a) { gt(a[0], 0.0); }},
    {"ge", {m}, [](const Args& a) { ge(a[0], 0.0); }},
    {"eq", {m, v}, [](const Args& a) { eq(a[0], a[1]); }},
    {"ne", {m, v}, [](const Args& a) { ne(a[0], a[1]); }},
    {"lt", {m, v}, [](const Args& a) { lt(a[0], a[1]); }},
    {"le", {m, v}, [](const Args& a) { le(a[0], a[1]); }},
    {"gt", {m, v}, [](const Args& a) { gt(a[0], a[1]); }},
    {"ge", {m, v}, [](const Args& a) { ge(a[0], a[1]); }},
    {"logical_and", {mask, m}, [](const Args& a) { logical_and(a[0], a[1]); }},
    {"logical_or", {mask, m}, [](const Args& a) { logical_or(a[0], a[1]); }},
    {"logical_not", {mask}, [](const Args& a) { logical_not(a[0]); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_compare_differential_calls() {
  using namespace ops;
  return {
      {"eq", compare_call([](const Tensor& a, const Tensor& b) { return eq(a, b); }, &eq)},
      {"ne", compare_call([](const Tensor& a, const Tensor& b) { return ne(a, b); }, &ne)},
      {"lt", compare_call([](const Tensor& a, const Tensor& b) { return lt(a, b); }, &lt)},
      {"le", compare_call([](const Tensor& a, const Tensor& b) { return le(a, b); }, &le)},
      {"gt", compare_call([](const Tensor& a, const Tensor& b) { return gt(a, b); }, &gt)},
      {"ge", compare_call([](const Tensor& a, const Tensor& b) { return ge(a, b); }, &ge)},
      {"logical_and", [](const Inputs& x, const json&) { return Outputs{logical_and(x[0], x[1])}; }},
      {"logical_or", [](const Inputs& x, const json&) { return Outputs{logical_or(x[0], x[1])}; }},
      {"logical_not", unary_call([](const Tensor& t) { return logical_not(t); })},
  };
}

// comparisons and logical ops return bools
const RegisterChecks ops_compare_registered(
    {.name = "framework/ops/compare", .misuse_rows = ops_compare_misuse_rows,
     .differential_calls = ops_compare_differential_calls,
     .no_gradient = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"}});

} // namespace
} // namespace headgrad::checks
