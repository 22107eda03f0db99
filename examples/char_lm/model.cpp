// model.cpp - the forward passes of model.hpp. Backward comes from autograd: every op used here
// records its own.
#include "model.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include <headgrad/framework/ops/nn_ops.hpp>
#include <headgrad/framework/ops/ops.hpp>

namespace char_lm {

namespace ops = headgrad::ops;
using headgrad::DType;

CausalSelfAttention::CausalSelfAttention(std::int64_t d_model, std::int64_t heads_, Generator& gen)
    : heads(heads_) {
  if (d_model % heads != 0) throw std::invalid_argument("CausalSelfAttention: d_model must be divisible by heads");
  // torch.nn.MultiheadAttention's initialisation: Xavier-uniform in_proj_weight, zero biases.
  const double bound = std::sqrt(6.0 / static_cast<double>(d_model + 3 * d_model));
  in_proj_weight = register_parameter("in_proj_weight", Tensor::uniform({3 * d_model, d_model}, -bound, bound, gen));
  in_proj_bias = register_parameter("in_proj_bias", Tensor::zeros({3 * d_model}));
  out_proj = register_module("out_proj", std::make_shared<nn::Linear>(d_model, d_model, true, gen));
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  ops::AttentionMask causal;
  causal.causal = true;                                                    // query i sees keys j <= i
  const Tensor qkv = ops::linear(x, in_proj_weight, in_proj_bias);         // (B, T, 3d) = [q | k | v]
  const Tensor y = ops::self_attention(qkv, heads, causal);                // (B, T, d), heads side by side
  return out_proj->forward(y);                                             // (B, T, d)
}

Block::Block(std::int64_t d_model, std::int64_t heads, Generator& gen) {
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(d_model));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(d_model, heads, gen));
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(d_model));
  fc = register_module("fc", std::make_shared<nn::Linear>(d_model, 4 * d_model, true, gen));
  proj = register_module("proj", std::make_shared<nn::Linear>(4 * d_model, d_model, true, gen));
  gelu = register_module("gelu", std::make_shared<nn::GELU>());
}

Tensor Block::forward(const Tensor& x) const {
  const Tensor h = x + attn->forward(ln1->forward(x));               // (B, T, d)
  return h + proj->forward(gelu->forward(fc->forward(ln2->forward(h)))); // (B, T, d)
}

CharLM::CharLM(const ModelConfig& config_, Generator& gen) : config(config_) {
  tok_emb = register_module("tok_emb", std::make_shared<nn::Embedding>(config.vocab, config.d_model, gen));
  pos_emb = register_module("pos_emb", std::make_shared<nn::Embedding>(config.context, config.d_model, gen));
  block = register_module("block", std::make_shared<Block>(config.d_model, config.heads, gen));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(config.d_model));
  head = register_module("head", std::make_shared<nn::Linear>(config.d_model, config.vocab, true, gen));
}

Tensor CharLM::forward(const Tensor& tokens) const {
  if (tokens.dim() != 2 || tokens.size(1) > config.context)
    throw std::invalid_argument("CharLM: tokens must be (B, T) with T <= context " + std::to_string(config.context));
  const Tensor positions = Tensor::arange(tokens.size(1), DType::i64);                      // (T)
  const Tensor x = tok_emb->forward(tokens) + pos_emb->forward(positions);     // (B, T, d) + (T, d)
  return head->forward(ln_f->forward(block->forward(x)));                     // (B, T, vocab)
}

} // namespace char_lm
