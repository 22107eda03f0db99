// promotion_checks.cpp - misuse rows of dtype promotion (promotion.hpp), which has no gradient.
// Registered as "framework/ops/promotion" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/promotion.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Promotion: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_promotion_misuse_rows() {
  const Tensor m = f32({2, 3}), v = f32({3});
  using namespace ops;
  return {
    {"result_type", {m, v}, [](const Args& a) { result_type(a[0], a[1]); }},
    {"arithmetic_operands", {m, v}, [](const Args& a) { arithmetic_operands(a[0], a[1], "arithmetic_operands"); }},
  };
}

const RegisterChecks ops_promotion_registered({"framework/ops/promotion", {}, ops_promotion_misuse_rows});

} // namespace
} // namespace headgrad::checks
