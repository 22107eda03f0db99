// compare_checks.cpp - misuse rows of the comparisons and logical ops (compare.hpp), which
// have no gradient.
// Registered as "framework/ops/compare" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
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

const RegisterChecks ops_compare_registered({"framework/ops/compare", {}, ops_compare_misuse_rows});

} // namespace
} // namespace headgrad::checks
