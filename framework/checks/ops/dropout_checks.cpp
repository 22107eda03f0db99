// dropout_checks.cpp - the checks of dropout (dropout.cpp: dropout,
// dropout_with_mask).
// Registered as "framework/ops/dropout" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_dropout_derivatives = R"(
380 | dropout | `y = x ⊙ m / (1 − p)` | `dx += dy ⊙ m / (1 − p)` | m / (1 − p)
    | `dropout.cpp` · `dropout_with_mask`
)";

// Dropout with a fixed mask and with a seeded one.
void dropout_rows(GradcheckRows& cases) {
  cases.push_back(row(kLayers, "dropout_with_mask (fixed mask, p 0.25)", "x [3, 4]",
                      [] { return std::vector{randn({3, 4}, 50)}; },
                      [](const std::vector<Tensor>& x) {
                        Tensor mask = Tensor::from({1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1}, {3, 4}, x[0].dtype());
                        return ops::dropout_with_mask(x[0], mask, 0.25);
                      }));
  // dropout draws its mask from the generator: a fresh generator of one seed per call gives the
  // same mask to every evaluation of the difference quotient
  cases.push_back(row(kLayers, "dropout (seeded mask, p 0.5)", "x [4, 5]", [] { return std::vector{randn({4, 5}, 51)}; },
                      [](const std::vector<Tensor>& x) {
                        Generator g(52);
                        return ops::dropout(x[0], 0.5, /*training=*/true, g);
                      }));
}

// Dropout: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_dropout_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"dropout", {x}, [](const Args& a) { dropout(a[0], 0.5, true, gen()); }},
    {"dropout_with_mask", {x, Tensor::ones({2, 3, 4})}, [](const Args& a) { dropout_with_mask(a[0], a[1], 0.5); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_dropout_differential_calls() {
  using namespace ops;
  return {
      {"dropout_with_mask", [](const Inputs& x, const json& p) { return Outputs{dropout_with_mask(x[0], x[1], p["p"])}; }},
  };
}

// dropout draws its mask from headgrad's generator, then calls dropout_with_mask, whose cases
// replay its derivative
const RegisterChecks ops_dropout_registered(
    {.name = "framework/ops/dropout", .gradcheck_rows = {dropout_rows}, .misuse_rows = ops_dropout_misuse_rows,
     .differential_calls = ops_dropout_differential_calls, .derivatives = ops_dropout_derivatives,
     .not_replayed = {"dropout"}});

} // namespace
} // namespace headgrad::checks
