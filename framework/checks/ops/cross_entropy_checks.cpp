// cross_entropy_checks.cpp - the checks of cross-entropy
// (cross_entropy.cpp: cross_entropy; sequence_mask, not differentiable, has a misuse row).
// Registered as "framework/ops/cross_entropy" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_cross_entropy_derivatives = R"(
390 | cross_entropy (weights, ignore_index, reduction)
    | `l_r = w_r (logsumexp x_r − x_r[t_r])`; `w_r` = a float mask's value (a weight), 1 where a bool/int mask
      is nonzero (a count), 1 without a mask, 0 where `t_r = ignore_index`; `L = Σ l_r / Σ w_r` (mean),
      `Σ l_r` (sum) or `l` (none)
    | `dx_r += g_r w_r (softmax(x_r) − onehot(t_r))`, `g_r = dL / Σ w` (mean), `dL` (sum), `dl_r` (none); rows
      with `w_r = 0` get 0 | softmax, targets, weights
    | `cross_entropy.cpp` · `cross_entropy`; kernels `cross_entropy_forward`, `cross_entropy_backward` (book loops beside the op; engine `engine/kernels/cross_entropy_rows.hpp`)
)";

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

// cross_entropy's two signatures: (logits, targets, mask) when p["legacy"], else with options.
Outputs cross_entropy_call(const Inputs& x, const json& p) {
  if (p["legacy"].get<bool>()) return {ops::cross_entropy(x[0], x[1], optional_input(x, 2))};
  ops::CrossEntropyOptions o;
  o.mask = optional_input(x, 2);
  o.ignore_index = p["ignore_index"].is_null() ? std::nullopt : std::optional<std::int64_t>(p["ignore_index"]);
  const std::string r = p["reduction"];
  o.reduction = r == "mean" ? ops::Reduction::mean : r == "sum" ? ops::Reduction::sum : ops::Reduction::none;
  return {ops::cross_entropy(x[0], x[1], o)};
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_cross_entropy_differential_calls() {
  using namespace ops;
  return {
      {"cross_entropy", cross_entropy_call},
      {"sequence_mask",
       [](const Inputs& x, const json& p) { return Outputs{sequence_mask(x[0], p["max_len"].get<std::int64_t>())}; }},
  };
}

// sequence_mask builds a bool mask from integer lengths
const RegisterChecks ops_cross_entropy_registered(
    {.name = "framework/ops/cross_entropy", .gradcheck_rows = {cross_entropy_rows},
     .misuse_rows = ops_cross_entropy_misuse_rows, .differential_calls = ops_cross_entropy_differential_calls,
     .derivatives = ops_cross_entropy_derivatives, .no_gradient = {"sequence_mask"}});

} // namespace
} // namespace headgrad::checks
