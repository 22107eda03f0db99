// cross_entropy_checks.cpp - gradient-check and misuse rows of cross-entropy
// (cross_entropy.cpp: cross_entropy; sequence_mask, not differentiable, has a misuse row).
// Registered as "framework/ops/cross_entropy" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Cross-entropy with every mask, weight, ignore_index and reduction form.
void cross_entropy_rows(GradcheckRows& cases) {
  cases.push_back(row(kLayers, "cross_entropy with mask", "logits [2, 3, 5], targets [2, 3]",
                      [] {
                        return std::vector{randn({2, 3, 5}, 60), ints({1, 4, 0, 2, 2, 3}, {2, 3}),
                                           Tensor::from({1, 1, 0, 1, 0, 0}, {2, 3}, DType::bool8)};
                      },
                      [](const std::vector<Tensor>& x) { return ops::cross_entropy(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "cross_entropy no mask", "logits [4, 3]",
                      [] { return std::vector{randn({4, 3}, 61), ints({0, 2, 1, 2}, {4})}; },
                      [](const std::vector<Tensor>& x) { return ops::cross_entropy(x[0], x[1]); }));
  cases.push_back(row(kLayers, "cross_entropy float weights, mean", "logits [2, 3, 4], weights [2, 3]",
                      [] { return std::vector{randn({2, 3, 4}, 62), ints({1, 3, 0, 2, 2, 1}, {2, 3})}; },
                      [](const std::vector<Tensor>& x) {
                        ops::CrossEntropyOptions o;
                        o.mask = Tensor::from({0.5, 1, 0, 2, 0.25, 1}, {2, 3}, DType::f64);
                        return ops::cross_entropy(x[0], x[1], o);
                      }));
  cases.push_back(row(kLayers, "cross_entropy ignore_index, sum", "logits [5, 3], two targets -100",
                      [] { return std::vector{randn({5, 3}, 63), ints({2, -100, 0, -100, 1}, {5})}; },
                      [](const std::vector<Tensor>& x) {
                        ops::CrossEntropyOptions o;
                        o.reduction = ops::Reduction::sum;
                        return ops::cross_entropy(x[0], x[1], o);
                      }));
  cases.push_back(row(kLayers, "cross_entropy reduction none, bool mask, ignore_index 1", "logits [2, 2, 3]",
                      [] { return std::vector{randn({2, 2, 3}, 64), ints({1, 2, 0, 2}, {2, 2})}; },
                      [](const std::vector<Tensor>& x) {
                        ops::CrossEntropyOptions o;
                        o.mask = Tensor::from({1, 1, 0, 1}, {2, 2}, DType::bool8);
                        o.ignore_index = 1;
                        o.reduction = ops::Reduction::none;
                        return ops::cross_entropy(x[0].transpose(0, 1), x[1], o);
                      }));
}

// Cross-entropy: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_cross_entropy_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  const Tensor mask = bools({1, 0, 1, 0, 1, 0}, {2, 3});
  using namespace ops;
  return {
    {"cross_entropy", {x, ints({0, 1, 2, 3, 0, 1}, {2, 3}), mask},
     [](const Args& a) { cross_entropy(a[0], a[1], a[2]); }, {2}},
    {"cross_entropy", {x, ints({0, 1, 2, 3, 0, 1}, {2, 3}), positive({2, 3})},
     [](const Args& a) { cross_entropy(a[0], a[1], CrossEntropyOptions{a[2], 1, Reduction::none}); }, {2}},
    {"sequence_mask", {ints({1, 3}, {2})}, [](const Args& a) { sequence_mask(a[0], 4); }},
  };
}

const RegisterChecks ops_cross_entropy_registered({"framework/ops/cross_entropy", {cross_entropy_rows},
                                                   ops_cross_entropy_misuse_rows});

} // namespace
} // namespace headgrad::checks
