// gradcheck_models.cpp - gradient-check rows for the attention stack, the layers and the whole
// reference model, one function per group: masked softmax (every mask form), head reshapes,
// dot-product attention, multi-head attention in both constructor signatures - d2l's and the
// PyTorch-style (embed_dim, num_heads) - w.r.t. queries, keys, values and every weight; the fused
// attention op with every mask form; linear,
// layer norm, dropout, cross-entropy; the encoder model and the causal language model (GPT) w.r.t.
// every parameter.
#include <fmt/format.h>

#include "framework/nn/layers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/random.hpp"
#include "models/gpt.hpp"
#include "models/transformer.hpp"
#include "train/cli/gradcheck_table.hpp"

namespace headgrad::cli {
namespace {

constexpr DType f64 = DType::f64;
// the groups of `headgrad gradcheck` (its --filter matches them)
constexpr const char* kAttention = "attention";
constexpr const char* kLayers = "layers";
constexpr const char* kModel = "model";

Tensor randn(const Dims& shape, std::uint64_t seed) {
  Generator g(seed);
  return Tensor::normal(shape, 0.0, 1.0, g, f64);
}

Tensor leaf(const Dims& shape, std::uint64_t seed) {
  Tensor t = randn(shape, seed);
  t.set_requires_grad(true);
  return t;
}

Tensor ints(std::vector<std::int64_t> v, const Dims& shape) { return Tensor::from_ints(std::move(v), shape); }

// A row over plain inputs: gradcheck copies them to float64 leaves.
GradcheckCase row(std::string group, std::string name, std::string shapes, std::function<std::vector<Tensor>()> in,
                  GradcheckFn fn) {
  GradcheckCase c;
  c.group = std::move(group);
  c.name = std::move(name);
  c.shapes = std::move(shapes);
  c.make_inputs = std::move(in);
  c.fn = std::move(fn);
  return c;
}

// A row over a module: checks the inputs and every parameter of the module together.
template <typename MakeModule, typename Forward>
GradcheckCase module_row(std::string group, std::string name, std::string shapes, std::vector<Dims> input_shapes,
                         MakeModule make, Forward forward) {
  GradcheckCase c;
  c.group = std::move(group);
  c.name = std::move(name);
  c.shapes = std::move(shapes);
  c.run = [input_shapes, make, forward](const GradcheckOptions& opt) {
    auto module = make();
    std::vector<Tensor> inputs;
    NamedTensors leaves; // the inputs as "input i", then the parameters by their dotted names
    for (std::size_t i = 0; i < input_shapes.size(); ++i) {
      inputs.push_back(leaf(input_shapes[i], 100 + i));
      leaves.emplace_back(fmt::format("input {}", i), inputs.back());
    }
    for (auto& named : module->named_parameters()) leaves.push_back(named);
    return gradcheck_leaves([&]() { return forward(*module, inputs); }, leaves, opt);
  };
  return c;
}

// Masked softmax: every mask form, including a zero-length row.
void masked_softmax_rows(std::vector<GradcheckCase>& cases) {
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

// transpose_qkv and transpose_output, the reshapes between the heads and the model width.
void head_reshape_rows(std::vector<GradcheckCase>& cases) {
  cases.push_back(row(kAttention, "transpose_qkv", "[2, 3, 8], heads 4", [] { return std::vector{randn({2, 3, 8}, 10)}; },
                      [](const std::vector<Tensor>& x) { return models::transpose_qkv(x[0], 4); }));
  cases.push_back(row(kAttention, "transpose_output", "[8, 3, 2], heads 4", [] { return std::vector{randn({8, 3, 2}, 11)}; },
                      [](const std::vector<Tensor>& x) { return models::transpose_output(x[0], 4); }));
}

// Dot-product attention, with and without valid_lens.
void dot_product_attention_rows(std::vector<GradcheckCase>& cases) {
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
void multi_head_attention_rows(std::vector<GradcheckCase>& cases) {
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

// The fused attention op (ops::attention, ops::self_attention) w.r.t. q, k, v, with every mask
// form: lengths with a zero-length row, per-query lengths, causal, a boolean keep mask.
void fused_attention_rows(std::vector<GradcheckCase>& cases) {
  auto lens = [](std::vector<std::int64_t> v, Dims shape) {
    ops::AttentionMask m;
    m.valid_lens = ints(std::move(v), shape);
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
                      [](const std::vector<Tensor>& x) {
                        ops::AttentionMask m;
                        m.causal = true;
                        m.keep = Tensor::from({1, 0, 1, 1}, {1, 4}, DType::bool8);
                        return ops::attention(x[0], x[1], x[2], 2, m);
                      }));
  cases.push_back(row(kAttention, "self_attention (packed qkv), causal", "qkv [2, 3, 12], heads 2",
                      [] { return std::vector{randn({2, 3, 12}, 99)}; },
                      [](const std::vector<Tensor>& x) {
                        ops::AttentionMask m;
                        m.causal = true;
                        return ops::self_attention(x[0], 2, m);
                      }));
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
                      [](const std::vector<Tensor>& x) {
                        ops::AttentionMask m;
                        m.causal = true;
                        m.keep = Tensor::from({1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1,
                                               1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0},
                                              {1, 2, 4, 4}, DType::bool8);
                        return ops::self_attention(x[0], 2, m);
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
                      [](const std::vector<Tensor>& x) {
                        ops::AttentionMask m;
                        m.causal = true;
                        Generator g(110);
                        return ops::self_attention(x[0], 2, m, nullptr, 0, {0.5, &g});
                      }));
}

// Linear, layer norm, dropout, cross-entropy, the FFN and an encoder block.
void layer_rows(std::vector<GradcheckCase>& cases) {
  cases.push_back(row(kLayers, "linear with bias", "x [2, 3, 4], W [5, 4], b [5]",
                      [] { return std::vector{randn({2, 3, 4}, 30), randn({5, 4}, 31), randn({5}, 32)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear no bias, 1-D input", "x [4], W [3, 4]",
                      [] { return std::vector{randn({4}, 33), randn({3, 4}, 34)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1]); }));
  cases.push_back(row(kLayers, "linear, transposed input", "x [4, 3]^T, W [2, 4]",
                      [] { return std::vector{randn({4, 3}, 35), randn({2, 4}, 36), randn({2}, 37)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0].transpose(0, 1), x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear_relu with bias", "x [2, 3, 4], W [5, 4], b [5]",
                      [] { return std::vector{randn({2, 3, 4}, 38), randn({5, 4}, 39), randn({5}, 46)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear_relu(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear_gelu with bias (erf form)", "x [2, 3, 4], W [5, 4], b [5] (N(0, 4))",
                      [] { return std::vector{randn({2, 3, 4}, 54), ops::mul_scalar(randn({5, 4}, 55), 2.0), randn({5}, 56)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear_gelu(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "linear_gelu tanh form, no bias, transposed input", "x [4, 3]^T, W [6, 4]",
                      [] { return std::vector{randn({4, 3}, 57), ops::mul_scalar(randn({6, 4}, 58), 2.0)}; },
                      [](const std::vector<Tensor>& x) {
                        return ops::linear_gelu(x[0].transpose(0, 1), x[1], Tensor(), ops::GeluApproximate::tanh);
                      }));
  cases.push_back(row(kLayers, "add_layer_norm", "x, y [2, 3, 6], w [6], b [6]",
                      [] { return std::vector{randn({2, 3, 6}, 47), randn({2, 3, 6}, 48), randn({6}, 49), randn({6}, 53)}; },
                      [](const std::vector<Tensor>& x) { return ops::add_layer_norm(x[0], x[1], x[2], x[3]); }));
  cases.push_back(row(kLayers, "linear with in_features 0 (only the bias matters)", "x [3, 0], W [2, 0], b [2]",
                      [] { return std::vector{randn({3, 0}, 38), randn({2, 0}, 39), randn({2}, 49)}; },
                      [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "layer_norm", "x [2, 3, 6], w [6], b [6]",
                      [] { return std::vector{randn({2, 3, 6}, 40), randn({6}, 41), randn({6}, 42)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "layer_norm, one row of 2", "x [1, 2]",
                      [] { return std::vector{randn({1, 2}, 43), randn({2}, 44), randn({2}, 45)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], x[1], x[2]); }));
  cases.push_back(row(kLayers, "layer_norm without affine parameters", "x [3, 5]",
                      [] { return std::vector{randn({3, 5}, 46)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0], Tensor(), Tensor()); }));
  cases.push_back(row(kLayers, "layer_norm weight only, transposed input", "x [4, 2]^T, w [4]",
                      [] { return std::vector{randn({4, 2}, 47), randn({4}, 48)}; },
                      [](const std::vector<Tensor>& x) { return ops::layer_norm(x[0].transpose(0, 1), x[1], Tensor()); }));
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
  cases.push_back(module_row(
      kLayers, "PositionWiseFFN", "x [2, 3, 4], ffn 6", {{2, 3, 4}},
      [] {
        Generator g(70);
        return std::make_shared<models::PositionWiseFFN>(4, 6, 4, g, f64);
      },
      [](models::PositionWiseFFN& m, const std::vector<Tensor>& x) { return m.forward(x[0]); }));
  cases.push_back(module_row(
      kLayers, "TransformerEncoderBlock", "x [2, 3, 4], heads 2, ffn 6", {{2, 3, 4}},
      [] {
        Generator g(71);
        return std::make_shared<models::TransformerEncoderBlock>(4, 6, 2, 0.0, false, g, f64);
      },
      [](models::TransformerEncoderBlock& m, const std::vector<Tensor>& x) { return m.forward(x[0], ints({3, 2}, {2})); }));
}

// nn::Sequential built in float32 and converted with Module::to(float64), as a user checks a
// float32 block of their own: w.r.t. the input and every parameter, reported by name ("0.weight").
void sequential_rows(std::vector<GradcheckCase>& cases) {
  cases.push_back(module_row(
      kLayers, "Sequential Linear GELU LayerNorm Linear, float32 made float64 by Module::to",
      "x [2, 3, 4], 4 -> 6 -> 3", {{2, 3, 4}},
      [] {
        Generator g(81);
        auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 6, true, g), std::make_shared<nn::GELU>(),
                                                    std::make_shared<nn::LayerNorm>(6),
                                                    std::make_shared<nn::Linear>(6, 3, true, g));
        seq->to(f64);
        return seq;
      },
      [](nn::Sequential& m, const std::vector<Tensor>& x) { return m.forward(x[0]); }));
}

// The whole reference model: logits and the masked loss w.r.t. every parameter.
void model_rows(std::vector<GradcheckCase>& cases) {
  auto make_model = [] {
    models::ModelConfig cfg;
    cfg.vocab = 7;
    cfg.d_model = 4;
    cfg.heads = 2;
    cfg.layers = 2;
    cfg.ffn = 6;
    cfg.max_len = 5;
    return std::make_shared<models::SequenceModel>(cfg, 80, f64);
  };
  cases.push_back(module_row(kModel, "SequenceModel logits, every parameter", "tokens [2, 5], d 4, 2 layers", {},
                             make_model, [](models::SequenceModel& m, const std::vector<Tensor>&) {
                               return m.forward(ints({3, 1, 6, 2, 5, 4, 4, 1, 0, 0}, {2, 5}), ints({5, 3}, {2}));
                             }));
  cases.push_back(module_row(kModel, "SequenceModel logits, composed attention", "tokens [2, 5], d 4, 2 layers", {},
                             [make_model] {
                               auto m = make_model();
                               for (auto& blk : m->blks) blk->attention->path = models::AttentionPath::composed;
                               return m;
                             },
                             [](models::SequenceModel& m, const std::vector<Tensor>&) {
                               return m.forward(ints({3, 1, 6, 2, 5, 4, 4, 1, 0, 0}, {2, 5}), ints({5, 3}, {2}));
                             }));
  cases.push_back(module_row(kModel, "SequenceModel masked loss", "tokens [2, 5] -> scalar", {}, make_model,
                             [](models::SequenceModel& m, const std::vector<Tensor>&) {
                               Tensor lens = ints({5, 3}, {2});
                               Tensor logits = m.forward(ints({3, 1, 6, 2, 5, 4, 4, 1, 0, 0}, {2, 5}), lens);
                               return ops::cross_entropy(logits, ints({1, 2, 3, 5, 6, 1, 4, 4, 0, 0}, {2, 5}),
                                                         ops::sequence_mask(lens, 5));
                             }));
}

// The causal language model (models/gpt.hpp), tiny: logits (fused and composed attention, tied
// and untied output layer) and the next-token loss w.r.t. every parameter.
void gpt_rows(std::vector<GradcheckCase>& cases) {
  auto make_gpt = [](bool tie, models::AttentionPath path) {
    return [tie, path] {
      models::GPTConfig cfg;
      cfg.vocab = 7;
      cfg.block_size = 5;
      cfg.layers = 2;
      cfg.heads = 2;
      cfg.d_model = 4;
      cfg.ffn = 8;
      cfg.tie_weights = tie;
      cfg.attention = path;
      auto m = std::make_shared<models::GPT>(cfg, 81, f64);
      // nanoGPT's N(0, 0.02) init makes every logit nearly equal; larger weights test more
      Generator g(82);
      for (auto& p : m->parameters()) {
        const Tensor w = Tensor::normal(p.shape(), 0.0, 0.5, g, f64);
        std::copy(w.data<double>(), w.data<double>() + w.numel(), p.data<double>());
      }
      return m;
    };
  };
  using models::AttentionPath;
  const Tensor tokens = ints({3, 1, 6, 2, 5, 4, 4, 1, 0, 2}, {2, 5});
  cases.push_back(module_row(kModel, "GPT logits, every parameter (tied)", "tokens [2, 5], d 4, 2 layers", {},
                             make_gpt(true, AttentionPath::fused),
                             [tokens](models::GPT& m, const std::vector<Tensor>&) { return m.forward(tokens); }));
  cases.push_back(module_row(kModel, "GPT logits, untied output layer, padding", "tokens [2, 5], lens [5, 3]", {},
                             make_gpt(false, AttentionPath::fused), [tokens](models::GPT& m, const std::vector<Tensor>&) {
                               return m.forward(tokens, ints({5, 3}, {2}));
                             }));
  cases.push_back(module_row(kModel, "GPT logits, composed attention", "tokens [2, 5], lens [5, 3]", {},
                             make_gpt(true, AttentionPath::composed),
                             [tokens](models::GPT& m, const std::vector<Tensor>&) {
                               return m.forward(tokens, ints({5, 3}, {2}));
                             }));
  cases.push_back(module_row(kModel, "GPT next-token loss", "tokens [2, 5] -> scalar", {},
                             make_gpt(true, AttentionPath::fused), [tokens](models::GPT& m, const std::vector<Tensor>&) {
                               return ops::cross_entropy(m.forward(tokens), ints({1, 6, 2, 5, 0, 1, 0, 2, 3, 3}, {2, 5}));
                             }));
}

} // namespace

std::vector<GradcheckCase> model_gradcheck_cases() {
  std::vector<GradcheckCase> cases;
  masked_softmax_rows(cases);
  head_reshape_rows(cases);
  dot_product_attention_rows(cases);
  multi_head_attention_rows(cases);
  fused_attention_rows(cases);
  layer_rows(cases);
  sequential_rows(cases);
  model_rows(cases);
  gpt_rows(cases);
  return cases;
}

} // namespace headgrad::cli
