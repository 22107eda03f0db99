// attention_checks.cpp - the checks of the fused attention op
// (attention.cpp: attention, self_attention) with every mask form.
// Registered as "framework/ops/attention" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_attention_derivatives = R"(
360 | attention, self_attention (fused multi-head; `s` = the scale, 0 meaning `1/√dh`, negative ones used as
      given; masks as masked_softmax's, keep also per head; attention dropout p optional)
    | per head h: `S = s Q_h K_hᵀ`, `P = softmax over kept keys (S)` (NaN rows as masked_softmax), `A = P ⊙ F`
      (dropout: `F = m / (1 − p)`, `m` drawn as dropout draws it; `F = 1` without), `O_h = A V_h`
    | `dV_h += Aᵀ dO_h`, `dA = dO_h V_hᵀ`, `dP = dA ⊙ F`, `dS = P ⊙ (dP − rowsum(dP ⊙ P))` (0 on masked keys),
      `dQ_h += s dS K_h`, `dK_h += s dSᵀ Q_h`
    | P (short T, or dropout) or O and the row log-sum-exp (long T: P recomputed tile by tile); the dropout
      flags
    | `attention.cpp` · `attention`, `self_attention`; masks `attention_mask.cpp`; kernels
      `attention_forward`, `attention_backward`, `flash_attention_forward`, `flash_attention_backward` (book
      loops beside the op; engine `engine/kernels/isa/attention_heads.cpp`)
)";

// The fused attention op (ops::attention, ops::self_attention) w.r.t. q, k, v, with every mask
// form: lengths with a zero-length row, per-query lengths, causal, a boolean keep mask.
void fused_attention_rows(GradcheckRows& cases) {
  auto lens = [](std::vector<std::int64_t> v, Dims shape) {
    ops::AttentionMask m;
    m.valid_lens = ints(std::move(v), shape);
    return m;
  };
  auto causal = [](Tensor keep = Tensor()) {
    ops::AttentionMask m;
    m.causal = true;
    m.keep = std::move(keep);
    return m;
  };
  cases.push_back(row(kAttention, "attention with lens [B], a zero length", "q [2, 3, 4], k, v [2, 5, 4], heads 2",
                      [] { return std::vector{randn({2, 3, 4}, 90), randn({2, 5, 4}, 91), randn({2, 5, 4}, 92)}; },
                      [lens](const std::vector<Tensor>& x) {
                        return ops::attention(x[0], x[1], x[2], 2, lens({4, 0}, {2}));
                      }));
  cases.push_back(row(kAttention, "attention with lens [B, Tq]", "q [2, 3, 6], k, v [2, 4, 6], heads 3",
                      [] { return std::vector{randn({2, 3, 6}, 93), randn({2, 4, 6}, 94), randn({2, 4, 6}, 95)}; },
                      [lens](const std::vector<Tensor>& x) {
                        return ops::attention(x[0], x[1], x[2], 3, lens({1, 4, 2, 3, 0, 4}, {2, 3}));
                      }));
  cases.push_back(row(kAttention, "attention causal, with a keep mask", "q, k, v [1, 4, 4], heads 2",
                      [] { return std::vector{randn({1, 4, 4}, 96), randn({1, 4, 4}, 97), randn({1, 4, 4}, 98)}; },
                      [causal](const std::vector<Tensor>& x) {
                        const Tensor keep = Tensor::from({1, 0, 1, 1}, {1, 4}, DType::bool8);
                        return ops::attention(x[0], x[1], x[2], 2, causal(keep));
                      }));
  cases.push_back(row(kAttention, "self_attention (packed qkv), causal", "qkv [2, 3, 12], heads 2",
                      [] { return std::vector{randn({2, 3, 12}, 99)}; },
                      [causal](const std::vector<Tensor>& x) { return ops::self_attention(x[0], 2, causal()); }));
  cases.push_back(row(kAttention, "attention with keep per head and lens [B]", "q [2, 3, 4], k, v [2, 4, 4], heads 2",
                      [] { return std::vector{randn({2, 3, 4}, 100), randn({2, 4, 4}, 101), randn({2, 4, 4}, 102)}; },
                      [](const std::vector<Tensor>& x) {
                        ops::AttentionMask m;
                        m.valid_lens = ints({4, 3}, {2});
                        Generator g(103);
                        std::vector<double> keep(2 * 2 * 3 * 4);
                        for (auto& k : keep) k = g.uniform() < 0.7 ? 1 : 0;
                        m.keep = Tensor::from(keep, {2, 2, 3, 4}, DType::bool8);
                        return ops::attention(x[0], x[1], x[2], 2, m);
                      }));
  cases.push_back(row(kAttention, "self_attention causal, keep per head", "qkv [1, 4, 12], heads 2",
                      [] { return std::vector{randn({1, 4, 12}, 104)}; },
                      [causal](const std::vector<Tensor>& x) {
                        const Tensor keep = Tensor::from({1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1,
                                                          1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0},
                                                         {1, 2, 4, 4}, DType::bool8);
                        return ops::self_attention(x[0], 2, causal(keep));
                      }));
  // attention dropout draws its flags from the generator: a fresh generator of one seed per call
  // gives every evaluation of the difference quotient the same flags
  cases.push_back(row(kAttention, "attention with dropout 0.3 (seeded), lens [B]",
                      "q [2, 3, 4], k, v [2, 5, 4], heads 2",
                      [] { return std::vector{randn({2, 3, 4}, 105), randn({2, 5, 4}, 106), randn({2, 5, 4}, 107)}; },
                      [lens](const std::vector<Tensor>& x) {
                        Generator g(108);
                        return ops::attention(x[0], x[1], x[2], 2, lens({5, 2}, {2}), nullptr, 0, {0.3, &g});
                      }));
  cases.push_back(row(kAttention, "self_attention causal, dropout 0.5 (seeded)", "qkv [2, 4, 12], heads 2",
                      [] { return std::vector{randn({2, 4, 12}, 109)}; },
                      [causal](const std::vector<Tensor>& x) {
                        Generator g(110);
                        return ops::self_attention(x[0], 2, causal(), nullptr, 0, {0.5, &g});
                      }));
}

// Fused attention: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_attention_misuse_rows() {
  using namespace ops;
  return {
    {"attention", {f32({2, 3, 4}, 1), f32({2, 5, 4}, 2), f32({2, 5, 4}, 3), ints({2, 5}, {2}), bools(std::vector<double>(30, 1), {2, 3, 5})},
     [](const Args& a) {
       Tensor w;
       attention(a[0], a[1], a[2], 2, {a[3], true, a[4]}, &w);
     },
     {3, 4}},
    {"self_attention", {f32({2, 3, 12}), ints({1, 3, 2, 3, 3, 1}, {2, 3})},
     [](const Args& a) { self_attention(a[0], 2, {a[1], false, Tensor()}); }, {1}},
    {"attention", {f32({2, 3, 4}, 1), f32({2, 5, 4}, 2), f32({2, 5, 4}, 3), bools(std::vector<double>(60, 1), {2, 2, 3, 5})},
     [](const Args& a) { attention(a[0], a[1], a[2], 2, {Tensor(), false, a[3]}, nullptr, 0, {0.5, &gen()}); }, {3}},
    {"self_attention", {f32({2, 3, 12}), bools(std::vector<double>(36, 1), {2, 2, 3, 3})},
     [](const Args& a) { self_attention(a[0], 2, {Tensor(), true, a[1]}, nullptr, 0, {0.25, &gen()}); }, {1}},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_attention_differential_calls() {
  using namespace ops;
  return {
      {"attention",
       [](const Inputs& x, const json& p) {
         return Outputs{attention(x[0], x[1], x[2], p["heads"].get<std::int64_t>(), mask_of(x, 3, p), nullptr,
                                  p.value("scale", 0.0))};
       }},
      {"self_attention",
       [](const Inputs& x, const json& p) {
         return Outputs{self_attention(x[0], p["heads"].get<std::int64_t>(), mask_of(x, 1, p), nullptr,
                                       p.value("scale", 0.0))};
       }},
  };
}

const RegisterChecks ops_attention_registered({"framework/ops/attention", {fused_attention_rows}, ops_attention_misuse_rows,
                                               ops_attention_differential_calls, ops_attention_derivatives});

} // namespace
} // namespace headgrad::checks
