// transformer_checks.cpp - gradient-check rows of the encoder (transformer.cpp): the FFN, an
// encoder block and the whole reference model w.r.t. every parameter.
// Registered as "models/transformer" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"
#include "models/transformer.hpp"

namespace headgrad::checks {
namespace {

// The FFN and an encoder block, w.r.t. the input and every parameter.
void block_rows(GradcheckRows& cases) {
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

// The whole reference model: logits and the masked loss w.r.t. every parameter.
void model_rows(GradcheckRows& cases) {
  auto make_model = [] {
    models::ModelConfig cfg;
    static_cast<models::StackConfig&>(cfg) = {.vocab = 7, .d_model = 4, .heads = 2, .layers = 2, .ffn = 6};
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

const RegisterChecks models_transformer_registered({"models/transformer", {block_rows, model_rows}, nullptr});

} // namespace
} // namespace headgrad::checks
