// model.hpp - a tiny causal character language model made of headgrad's public pieces:
// token + position embeddings, one pre-LayerNorm Transformer block (causal multi-head
// self-attention, then a GELU MLP, each with a residual connection), a final LayerNorm and a
// linear head over the characters.
//
// Parameter names follow the PyTorch modules of load_in_pytorch.py one to one (the attention's
// are torch.nn.MultiheadAttention's: in_proj_weight holds W_q, W_k and W_v stacked), so the
// safetensors file this model writes is that module's state_dict.
#pragma once
#include <cstdint>
#include <memory>

#include <headgrad/framework/nn/layers.hpp>
#include <headgrad/framework/nn/module.hpp>
#include <headgrad/framework/core/random.hpp>

namespace char_lm {

using headgrad::Generator;
using headgrad::Tensor;
namespace nn = headgrad::nn;

struct ModelConfig {
  std::int64_t vocab = 0;    // distinct characters
  std::int64_t context = 32; // the longest input, in characters
  std::int64_t d_model = 48;
  std::int64_t heads = 4;
};

// Causal self-attention with one packed projection: qkv = x W_in^T + b_in, (B, T, 3d); the fused
// ops::self_attention splits it into heads and lets query i attend to keys j <= i only.
class CausalSelfAttention : public nn::Module {
public:
  CausalSelfAttention(std::int64_t d_model, std::int64_t heads, Generator& gen);
  Tensor forward(const Tensor& x) const; // (B, T, d) -> (B, T, d)

  std::int64_t heads;
  Tensor in_proj_weight, in_proj_bias;    // (3d, d), (3d)
  std::shared_ptr<nn::Linear> out_proj;   // (d, d)
};

// x + attn(ln1(x)), then x + proj(gelu(fc(ln2(x)))): GPT-2's pre-LayerNorm block.
class Block : public nn::Module {
public:
  Block(std::int64_t d_model, std::int64_t heads, Generator& gen);
  Tensor forward(const Tensor& x) const;

  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<nn::Linear> fc, proj; // d -> 4d -> d
  std::shared_ptr<nn::GELU> gelu;       // erf form, PyTorch's default
};

class CharLM : public nn::Module {
public:
  CharLM(const ModelConfig& config, Generator& gen);
  // tokens (B, T) int64 with T <= context -> logits (B, T, vocab) for the next character.
  Tensor forward(const Tensor& tokens) const;

  ModelConfig config;
  std::shared_ptr<nn::Embedding> tok_emb, pos_emb;
  std::shared_ptr<Block> block;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;
};

} // namespace char_lm
