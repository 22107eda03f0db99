// masked_softmax_checks.cpp - the checks of the masked softmax
// (masked_softmax.cpp) with every mask form, including a zero-length row.
// Registered as "framework/ops/masked_softmax" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_masked_softmax_derivatives = R"(
290 | masked_softmax (valid_lens 1-D/2-D, lengths above Tk keep every key; X (B, Tq, Tk) or (B, H, Tq, Tk); or a
      whole `AttentionMask`: lengths, causal and keep together), causal_softmax, masked_softmax_keep (also
      4-D)
    | softmax over kept keys (the mask built by `attention_mask.cpp` · `kept_keys`, as for attention); masked
      `y = 0`; a row with nothing kept is all 0; a NaN or `+inf` among the kept logits makes the whole row
      NaN, masked keys too (PyTorch's `masked_fill(−inf)` + softmax)
    | `dx_k += y_k (dy_k − Σ_i dy_i y_i)` for kept `k`; masked `dx_k = 0` exactly, even in a NaN row (the fill
      cuts their gradient path); empty row ⇒ `dx = 0` | y, lengths, keep mask
    | `masked_softmax.cpp` · `softmax_rows`; kernels `softmax_forward`, `softmax_backward` (book loops in `masked_softmax.cpp`; engine `engine/kernels/row_softmax.hpp`)
)";

// Masked softmax: every mask form, including a zero-length row.
void masked_softmax_rows(GradcheckRows& cases) {
  cases.push_back(row(kAttention, "masked_softmax no mask", "[2, 3, 5]", [] { return std::vector{randn({2, 3, 5}, 1)}; },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax(x[0]); }));
  cases.push_back(row(kAttention, "masked_softmax 1-D lens", "[2, 3, 5], lens [2]",
                      [] { return std::vector{randn({2, 3, 5}, 2), ints({2, 4}, {2})}; },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax(x[0], x[1]); }));
  cases.push_back(row(kAttention, "masked_softmax 2-D lens", "[2, 3, 5], lens [2, 3]",
                      [] { return std::vector{randn({2, 3, 5}, 3), ints({1, 3, 5, 2, 4, 1}, {2, 3})}; },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax(x[0], x[1]); }));
  cases.push_back(row(kAttention, "masked_softmax zero-length row", "[2, 3, 4], lens [2, 3] with 0s",
                      [] { return std::vector{randn({2, 3, 4}, 4), ints({0, 2, 4, 1, 0, 3}, {2, 3})}; },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax(x[0], x[1]); }));
  cases.push_back(row(kAttention, "masked_softmax all rows length 0", "[1, 2, 3], lens [1]",
                      [] { return std::vector{randn({1, 2, 3}, 5), ints({0}, {1})}; },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax(x[0], x[1]); }));
  cases.push_back(row(kAttention, "causal_softmax", "[2, 4, 4]", [] { return std::vector{randn({2, 4, 4}, 6)}; },
                      [](const std::vector<Tensor>& x) { return ops::causal_softmax(x[0]); }));
  cases.push_back(row(kAttention, "causal_softmax 4-D", "[2, 2, 3, 5]", [] { return std::vector{randn({2, 2, 3, 5}, 7)}; },
                      [](const std::vector<Tensor>& x) { return ops::causal_softmax(x[0]); }));
  cases.push_back(row(kAttention, "masked_softmax_keep (B, Tk)", "[2, 3, 4], keep [2, 4]",
                      [] {
                        Tensor keep = Tensor::from({1, 0, 1, 1, 0, 0, 1, 0}, {2, 4}, DType::bool8);
                        return std::vector{randn({2, 3, 4}, 8), keep};
                      },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax_keep(x[0], x[1]); }));
  cases.push_back(row(kAttention, "masked_softmax_keep (B, Tq, Tk)", "[1, 2, 3], keep [1, 2, 3]",
                      [] {
                        Tensor keep = Tensor::from({1, 1, 0, 0, 0, 0}, {1, 2, 3}, DType::bool8);
                        return std::vector{randn({1, 2, 3}, 9), keep};
                      },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax_keep(x[0], x[1]); }));
  // 4-D scores (B, H, Tq, Tk), as multi-head attention makes them: every head gets its row's mask
  cases.push_back(row(kAttention, "masked_softmax 4-D scores, lens [B, Tq]", "[2, 2, 3, 5], lens [2, 3] with a 0",
                      [] { return std::vector{randn({2, 2, 3, 5}, 12), ints({1, 3, 5, 0, 4, 2}, {2, 3})}; },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax(x[0], x[1]); }));
  cases.push_back(row(kAttention, "masked_softmax_keep 4-D scores, keep per head", "[1, 2, 2, 3], keep [1, 2, 2, 3]",
                      [] {
                        Tensor keep = Tensor::from({1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0}, {1, 2, 2, 3}, DType::bool8);
                        return std::vector{randn({1, 2, 2, 3}, 13), keep};
                      },
                      [](const std::vector<Tensor>& x) { return ops::masked_softmax_keep(x[0], x[1]); }));
  // a whole AttentionMask: lengths, causal and a per-head keep together (what the composed attention takes)
  cases.push_back(row(kAttention, "masked_softmax lens, causal, keep per head",
                      "[2, 2, 3, 4], lens [2, 3], keep [2, 2, 3, 4]",
                      [] { return std::vector{randn({2, 2, 3, 4}, 14)}; },
                      [](const std::vector<Tensor>& x) {
                        ops::AttentionMask m;
                        m.valid_lens = ints({3, 1, 4, 0, 2, 4}, {2, 3});
                        m.causal = true;
                        m.keep = Tensor::from({1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1,
                                               1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1},
                                              {2, 2, 3, 4}, DType::bool8);
                        return ops::masked_softmax(x[0], m);
                      }));
}

// Masked softmax: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_masked_softmax_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"masked_softmax", {x, ints({1, 3}, {2})}, [](const Args& a) { masked_softmax(a[0], a[1]); }, {1}},
    {"masked_softmax", {x, ints({1, 3, 0, 2, 4, 4}, {2, 3})}, [](const Args& a) { masked_softmax(a[0], a[1]); }, {1}},
    {"causal_softmax", {x}, [](const Args& a) { causal_softmax(a[0]); }},
    {"masked_softmax_keep", {x, bools({1, 1, 0, 1, 0, 0, 1, 1}, {2, 4})},
     [](const Args& a) { masked_softmax_keep(a[0], a[1]); }},
    {"masked_softmax", {f32({2, 2, 3, 4}), ints({1, 3}, {2}), bools(std::vector<double>(48, 1), {2, 2, 3, 4})},
     [](const Args& a) { masked_softmax(a[0], AttentionMask{a[1], true, a[2]}); }, {1, 2}},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_masked_softmax_differential_calls() {
  using namespace ops;
  return {
      {"masked_softmax", [](const Inputs& x, const json&) { return Outputs{masked_softmax(x[0], optional_input(x, 1))}; }},
      {"causal_softmax", unary_call([](const Tensor& t) { return causal_softmax(t); })},
      {"masked_softmax_keep", [](const Inputs& x, const json&) { return Outputs{masked_softmax_keep(x[0], x[1])}; }},
      {"masked_softmax_mask", [](const Inputs& x, const json& p) { return Outputs{masked_softmax(x[0], mask_of(x, 1, p))}; }},
  };
}

const RegisterChecks ops_masked_softmax_registered({"framework/ops/masked_softmax", {masked_softmax_rows}, ops_masked_softmax_misuse_rows,
                                                    ops_masked_softmax_differential_calls, ops_masked_softmax_derivatives});

} // namespace
} // namespace headgrad::checks
