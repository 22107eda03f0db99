// attention_checks.cpp - gradient-check rows of the attention models (attention.cpp): the head
// reshapes, dot-product attention, multi-head attention in both constructor signatures - d2l's and the
// PyTorch-style (embed_dim, num_heads) - w.r.t. queries, keys, values and every weight.
// Registered as "models/attention" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"
#include "models/attention.hpp"

namespace headgrad::checks {
namespace {

// transpose_qkv and transpose_output, the reshapes between the heads and the model width.
void head_reshape_rows(GradcheckRows& cases) {
  cases.push_back(row(kAttention, "transpose_qkv", "[2, 3, 8], heads 4", [] { return std::vector{randn({2, 3, 8}, 10)}; },
                      [](const std::vector<Tensor>& x) { return models::transpose_qkv(x[0], 4); }));
  cases.push_back(row(kAttention, "transpose_output", "[8, 3, 2], heads 4", [] { return std::vector{randn({8, 3, 2}, 11)}; },
                      [](const std::vector<Tensor>& x) { return models::transpose_output(x[0], 4); }));
}

// Dot-product attention, with and without valid_lens.
void dot_product_attention_rows(GradcheckRows& cases) {
  cases.push_back(row(kAttention, "DotProductAttention lens [B']", "Q [4, 3, 2], K [4, 5, 2], V [4, 5, 3]",
                      [] {
                        return std::vector{randn({4, 3, 2}, 12), randn({4, 5, 2}, 13), randn({4, 5, 3}, 14),
                                           ints({2, 5, 1, 3}, {4})};
                      },
                      [](const std::vector<Tensor>& x) {
                        models::DotProductAttention att(0.0);
                        return att.forward(x[0], x[1], x[2], x[3]);
                      }));
  cases.push_back(row(kAttention, "DotProductAttention no mask", "Q [2, 2, 3], K [2, 4, 3], V [2, 4, 2]",
                      [] { return std::vector{randn({2, 2, 3}, 15), randn({2, 4, 3}, 16), randn({2, 4, 2}, 17)}; },
                      [](const std::vector<Tensor>& x) {
                        models::DotProductAttention att(0.0);
                        return att.forward(x[0], x[1], x[2]);
                      }));
}

// Multi-head attention in both constructor signatures, w.r.t. the inputs and every weight.
void multi_head_attention_rows(GradcheckRows& cases) {
  cases.push_back(module_row(
      kAttention, "MHA d2l, lens [B], q/k/v + W_q,W_k,W_v,W_o", "q [2, 3, 5], k [2, 4, 6], v [2, 4, 7], h 8/2",
      {{2, 3, 5}, {2, 4, 6}, {2, 4, 7}},
      [] {
        Generator g(21);
        return std::make_shared<models::MultiHeadAttention>(6, 5, 7, 8, 2, 0.0, false, g, f64);
      },
      [](models::MultiHeadAttention& m, const std::vector<Tensor>& x) {
        return m.forward(x[0], x[1], x[2], ints({3, 2}, {2}));
      }));
  cases.push_back(module_row(
      kAttention, "MHA d2l, lens [B, Tq], with bias", "q [2, 3, 4], k=v [2, 4, 4], h 4/2", {{2, 3, 4}, {2, 4, 4}},
      [] {
        Generator g(22);
        return std::make_shared<models::MultiHeadAttention>(4, 4, 4, 4, 2, 0.0, true, g, f64);
      },
      [](models::MultiHeadAttention& m, const std::vector<Tensor>& x) {
        return m.forward(x[0], x[1], x[1], ints({1, 4, 2, 3, 0, 4}, {2, 3}));
      }));
  cases.push_back(module_row(
      kAttention, "MHA self-attention (embed_dim, heads)", "x [2, 3, 8], heads 2", {{2, 3, 8}},
      [] {
        Generator g(23);
        return std::make_shared<models::MultiHeadAttention>(8, 2, g, f64);
      },
      [](models::MultiHeadAttention& m, const std::vector<Tensor>& x) { return m.forward(x[0]); }));
  // training with attention dropout on the fused path (the op draws the flags): the layer's dropout
  // generator reset before every forward, so every evaluation drops the same weights
  cases.push_back(module_row(
      kAttention, "MHA fused, attention dropout 0.3 (seeded)", "x [2, 4, 4], lens [B], h 4/2",
      {{2, 4, 4}},
      [] {
        Generator g(24);
        auto m = std::make_shared<models::MultiHeadAttention>(4, 4, 4, 4, 2, 0.3, true, g, f64);
        m->path = models::AttentionPath::fused;
        return m;
      },
      [](models::MultiHeadAttention& m, const std::vector<Tensor>& x) {
        m.attention->dropout->gen = Generator(25);
        return m.forward(x[0], x[0], x[0], ints({4, 2}, {2}));
      }));
}

const RegisterChecks models_attention_registered({"models/attention", {head_reshape_rows, dot_product_attention_rows, multi_head_attention_rows},
                                                  nullptr});

} // namespace
} // namespace headgrad::checks
