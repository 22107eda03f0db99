// token_model.hpp - what the trainer trains: a model from int64 tokens (B, T) to logits
// (B, T, V). The toy tasks' encoder (transformer.hpp, SequenceModel) and the causal language
// model (gpt.hpp, GPT) are both one; train/ works on this interface only.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "framework/nn/module.hpp"

namespace headgrad::models {

class TokenModel : public nn::Module {
public:
  // tokens (B, T) int64, valid_lens (B) int64 (positions t >= valid_lens[b] are padding, which no
  // position attends to) -> logits (B, T, V)
  virtual Tensor forward(const Tensor& tokens, const Tensor& valid_lens) = 0;
  // A new model of the same configuration and dtype (fresh parameters, its dropout seeded from
  // `seed`): a thread replica, which then shares this one's parameter values.
  virtual std::unique_ptr<TokenModel> replica(std::uint64_t seed) const = 0;
  // Attention weights of every layer from the last forward, each (B, heads, T, T); after
  // keep_attention_weights(true) (the fused attention keeps them only when asked).
  virtual std::vector<Tensor> attention_weights() const = 0;
  virtual void keep_attention_weights(bool on) = 0;
};

} // namespace headgrad::models
