// gpt_checks.cpp - gradient-check rows of the causal language model (gpt.cpp) w.r.t. every
// parameter.
// Registered as "models/gpt" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"
#include "models/gpt.hpp"

namespace headgrad::checks {
namespace {

// The causal language model (models/gpt.hpp), tiny: logits (fused and composed attention, tied
// and untied output layer) and the next-token loss w.r.t. every parameter.
void gpt_rows(GradcheckRows& cases) {
  auto make_gpt = [](bool tie, models::AttentionPath path) {
    return [tie, path] {
      models::GPTConfig cfg;
      static_cast<models::StackConfig&>(cfg) = {.vocab = 7, .d_model = 4, .heads = 2, .layers = 2, .ffn = 8};
      cfg.block_size = 5;
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

const RegisterChecks models_gpt_registered({"models/gpt", {gpt_rows}, nullptr});

} // namespace
} // namespace headgrad::checks
