// sampling_checks.cpp - misuse rows of sampling (sampling.hpp), which has no gradient and draws
// from headgrad's generator (no PyTorch cases).
// Registered as "train/sample/sampling" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "train/sample/sampling.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Sampling: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_sampling_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"multinomial", {positive({2, 3})}, [](const Args& a) { multinomial(a[0], 2, true, gen()); }},
    {"multinomial", {positive({3})}, [](const Args& a) { multinomial(a[0], 2, false, gen()); }},
    {"sample_logits", {x}, [](const Args& a) { sample_logits(a[0], {}, gen()); }},
    {"sample_logits", {x}, [](const Args& a) { sample_logits(a[0], {0.5, 2}, gen()); }},
  };
}

// samples are indices drawn from headgrad's generator
const RegisterChecks ops_sampling_registered(
    {.name = "train/sample/sampling", .misuse_rows = ops_sampling_misuse_rows,
     .no_gradient = {"multinomial", "sample_logits"}});

} // namespace
} // namespace headgrad::checks
