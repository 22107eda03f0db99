// gpt.hpp - a decoder-only (GPT) causal language model, module for module as nanoGPT's model.py
// (Karpathy, https://github.com/karpathy/nanoGPT) writes it with bias=False, so that its parameter
// names are that PyTorch model's state_dict (tests/reference/gpt_model.py is the short PyTorch
// version the golden tests and the benchmark run):
//
//   x = drop(wte(tokens) + wpe(positions))                       transformer.wte / wpe / drop
//   for each block h.i:
//     x = x + attn(ln_1(x))   attn: c_attn (one gemm for q | k | v), causal multi-head attention,
//                                   c_proj, resid_dropout
//     x = x + mlp(ln_2(x))    mlp: c_fc, GELU, c_proj, dropout
//   logits = lm_head(ln_f(x))                                    (lm_head = wte's weight if tied)
//
// Attention is the fused op (ops::self_attention with a causal mask, attn_dropout's mask drawn by
// the op) on the packed c_attn output; composed (AttentionPath::composed) it runs the ops of
// model.py's manual version one by one: scores, causal masked softmax, dropout, weighted sum.
// Both go through models::multi_head_attention (models/attention.hpp).
//
// Sampling (train/sample/generate.hpp) runs these modules with a key/value cache
// (train/sample/kv_cache.hpp): a new token costs one position instead of a forward over the
// whole context.
#pragma once
#include <memory>
#include <vector>

#include "framework/nn/layers.hpp"
#include "models/attention.hpp"
#include "models/stack_config.hpp"
#include "models/token_model.hpp"

namespace headgrad::models {

// nanoGPT's sizes (GPTConfig's defaults: vocab 65, block_size 64, 4 layers, 4 heads, d_model 128,
// ffn 512) and its context length.
struct GPTConfig : StackConfig {
  GPTConfig() : StackConfig{.vocab = 65, .d_model = 128, .heads = 4, .layers = 4, .ffn = 512} {}
  std::int64_t block_size = 64;
  bool tie_weights = true; // lm_head.weight is transformer.wte.weight (nanoGPT's weight tying)
  void validate() const;   // std::invalid_argument naming the field and the rule
};

class CausalSelfAttention : public nn::Module {
public:
  CausalSelfAttention(const GPTConfig& cfg, Generator& gen, DType dtype);
  // x (B, T, C), valid_lens undefined or (B) -> (B, T, C)
  Tensor forward(const Tensor& x, const Tensor& valid_lens);
  // residual + forward(x, valid_lens): a block's `x + attn(ln_1(x))`, the add folded into c_proj
  Tensor forward_add(const Tensor& x, const Tensor& valid_lens, const Tensor& residual);

  std::int64_t n_head, n_embd;
  AttentionPath path = AttentionPath::fused; // composed: model.py's manual attention, op by op
  AttentionWeights weights;                  // (B, heads, T, T) of the last forward (see AttentionWeights)
  std::shared_ptr<nn::Linear> c_attn, c_proj;
  std::shared_ptr<nn::Dropout> attn_dropout, resid_dropout;

private:
  Tensor heads(const Tensor& x, const Tensor& valid_lens); // the attended heads (B, T, C), before c_proj
};

// c_proj(gelu(c_fc(x))), then dropout: (..., C) -> (..., ffn) -> (..., C). GELU is the exact
// (erf) form, as nanoGPT's nn.GELU(); c_fc and it run as one fused op (ops::linear_gelu).
class MLP : public nn::Module {
public:
  MLP(const GPTConfig& cfg, Generator& gen, DType dtype);
  Tensor forward(const Tensor& x);
  // residual + forward(x): a block's `x + mlp(ln_2(x))`, the add folded into c_proj
  Tensor forward_add(const Tensor& x, const Tensor& residual);
  std::shared_ptr<nn::Linear> c_fc, c_proj;
  std::shared_ptr<nn::GELU> gelu;
  std::shared_ptr<nn::Dropout> dropout;
};

class Block : public nn::Module {
public:
  Block(const GPTConfig& cfg, Generator& gen, DType dtype);
  Tensor forward(const Tensor& x, const Tensor& valid_lens);
  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

// nanoGPT's `transformer` ModuleDict: the embeddings, the blocks, the final norm.
class GPTBody : public nn::Module {
public:
  GPTBody(const GPTConfig& cfg, Generator& gen, DType dtype);
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Dropout> drop;
  std::vector<std::shared_ptr<Block>> h;
  std::shared_ptr<nn::LayerNorm> ln_f;
};

class GPT : public TokenModel {
public:
  // nanoGPT's initialisation: every Linear and Embedding weight N(0, 0.02), each residual
  // projection (c_proj) N(0, 0.02 / sqrt(2 layers)) (GPT-2's scaled init), LayerNorm weights 1.
  GPT(const GPTConfig& cfg, std::uint64_t seed, DType dtype = DType::f32);
  // tokens (B, T <= block_size) -> logits (B, T, V) at every position
  Tensor forward(const Tensor& tokens, const Tensor& valid_lens = Tensor()) override;
  std::unique_ptr<TokenModel> replica(std::uint64_t seed) const override;
  std::vector<Tensor> attention_weights() const override;
  void keep_attention_weights(bool on) override;

  GPTConfig config;
  std::shared_ptr<GPTBody> transformer;
  std::shared_ptr<nn::Linear> lm_head; // null when tied
  Tensor lm_head_weight() const;       // (V, C): lm_head's, or wte's when tied

  // forward's first and last parts, also run by the key/value cache (train/sample/kv_cache.hpp):
  // tokens (B, T) at positions first_position .. first_position + T - 1 -> (B, T, C) before the
  // blocks; and x (B, T, C) after them -> logits (B, T, V) through ln_f and lm_head.
  Tensor embed(const Tensor& tokens, std::int64_t first_position);
  Tensor head(const Tensor& x) const;
};

} // namespace headgrad::models
