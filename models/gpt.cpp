// gpt.cpp - read it next to nanoGPT's model.py: each forward follows its code line by line.
#include "models/gpt.hpp"

#include <cmath>
#include <fmt/format.h>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::models {
namespace {

// p ~ N(0, std^2) in place (torch.nn.init.normal_); the handle, and so the registration, stays.
void init_normal(const Tensor& p, double std, Generator& gen) {
  dispatch_float(p.dtype(), "init_normal", [&]<typename T>() {
    T* d = p.data<T>();
    for (std::int64_t i = 0, n = p.numel(); i < n; ++i) d[i] = static_cast<T>(gen.normal() * std);
  });
}

constexpr double kInitStd = 0.02;

// residual + dropout(proj(h)). When the dropout is the identity the add goes inside the
// projection's op (ops::linear_residual: its gemm adds h W^T onto the residual), one pass over
// (B, T, C) less each way; with dropout between them they stay two ops.
Tensor project_add(const nn::Linear& proj, nn::Dropout& dropout, const Tensor& h, const Tensor& residual) {
  if (dropout.is_identity()) return ops::linear_residual(h, proj.weight, proj.bias, residual);
  return residual + dropout.forward(proj.forward(h));
}

} // namespace

void GPTConfig::validate() const {
  validate_stack(*this);
  if (block_size <= 0) throw std::invalid_argument(fmt::format("block_size must be positive, got {}", block_size));
}

CausalSelfAttention::CausalSelfAttention(const GPTConfig& cfg, Generator& gen, DType dtype)
    : n_head(cfg.heads), n_embd(cfg.d_model), path(cfg.attention) {
  // key, query, value projections for all heads, in a batch: c_attn (3C, C)
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(n_embd, 3 * n_embd, false, gen, dtype));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(n_embd, n_embd, false, gen, dtype));
  attn_dropout = register_module("attn_dropout", std::make_shared<nn::Dropout>(cfg.dropout, gen.next_u64()));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(cfg.dropout, gen.next_u64()));
}

Tensor CausalSelfAttention::heads(const Tensor& x, const Tensor& valid_lens) {
  // x: (B, T, C); qkv: (B, T, 3C) = [q | k | v], head h the columns h*hs .. (h+1)*hs of each
  Projected p;
  p.qkv = c_attn->forward(x);
  // causal, and no position attends to padding (t >= valid_lens[b])
  ops::AttentionMask mask;
  mask.valid_lens = valid_lens;
  mask.causal = true;
  // (B, T, C), the heads side by side (before c_proj); model.py's att = attn_dropout(softmax(masked scores)), y = att @ v
  return multi_head_attention(p, n_head, mask, path, *attn_dropout, weights);
}

Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& valid_lens) {
  // output projection
  return resid_dropout->forward(c_proj->forward(heads(x, valid_lens)));
}

Tensor CausalSelfAttention::forward_add(const Tensor& x, const Tensor& valid_lens, const Tensor& residual) {
  return project_add(*c_proj, *resid_dropout, heads(x, valid_lens), residual);
}

MLP::MLP(const GPTConfig& cfg, Generator& gen, DType dtype) {
  c_fc = register_module("c_fc", std::make_shared<nn::Linear>(cfg.d_model, cfg.ffn, false, gen, dtype));
  gelu = register_module("gelu", std::make_shared<nn::GELU>());
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(cfg.ffn, cfg.d_model, false, gen, dtype));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(cfg.dropout, gen.next_u64()));
}

Tensor MLP::forward(const Tensor& x) {
  // (B, T, C) -> (B, T, ffn): gelu(c_fc(x)) as one op -> (B, T, C)
  const Tensor h = ops::linear_gelu(x, c_fc->weight, c_fc->bias, gelu->approximate);
  return dropout->forward(c_proj->forward(h));
}

Tensor MLP::forward_add(const Tensor& x, const Tensor& residual) {
  return project_add(*c_proj, *dropout, ops::linear_gelu(x, c_fc->weight, c_fc->bias, gelu->approximate), residual);
}

Block::Block(const GPTConfig& cfg, Generator& gen, DType dtype) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(cfg.d_model, 1e-5, dtype, false));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(cfg, gen, dtype));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(cfg.d_model, 1e-5, dtype, false));
  mlp = register_module("mlp", std::make_shared<MLP>(cfg, gen, dtype));
}

Tensor Block::forward(const Tensor& x, const Tensor& valid_lens) {
  // x: (B, T, C), pre-LayerNorm residual blocks
  // y = x + attn(ln_1(x)); out = y + mlp(ln_2(y)), each add inside its projection's op
  const Tensor y = attn->forward_add(ln_1->forward(x), valid_lens, x);
  return mlp->forward_add(ln_2->forward(y), y);
}

GPTBody::GPTBody(const GPTConfig& cfg, Generator& gen, DType dtype) {
  wte = register_module("wte", std::make_shared<nn::Embedding>(cfg.vocab, cfg.d_model, gen, dtype));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(cfg.block_size, cfg.d_model, gen, dtype));
  drop = register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout, gen.next_u64()));
  for (std::int64_t i = 0; i < cfg.layers; ++i)
    h.push_back(register_module(fmt::format("h.{}", i), std::make_shared<Block>(cfg, gen, dtype)));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(cfg.d_model, 1e-5, dtype, false));
}

GPT::GPT(const GPTConfig& cfg, std::uint64_t seed, DType dtype) : config(cfg) {
  cfg.validate();
  Generator gen(seed);
  transformer = register_module("transformer", std::make_shared<GPTBody>(cfg, gen, dtype));
  if (!cfg.tie_weights)
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(cfg.d_model, cfg.vocab, false, gen, dtype));
  // _init_weights: Linear and Embedding N(0, 0.02); then c_proj.weight N(0, 0.02 / sqrt(2 n_layer))
  Generator init(mix_seed(seed, 0x494e4954)); // "INIT": a stream of its own, independent of the dropout seeds
  const double proj_std = kInitStd / std::sqrt(2.0 * static_cast<double>(cfg.layers));
  for (const auto& [name, p] : named_parameters()) {
    if (name.ends_with("ln_1.weight") || name.ends_with("ln_2.weight") || name.ends_with("ln_f.weight")) continue;
    init_normal(p, name.ends_with("c_proj.weight") ? proj_std : kInitStd, init);
  }
}

std::unique_ptr<TokenModel> GPT::replica(std::uint64_t seed) const {
  return std::make_unique<GPT>(config, seed, transformer->wte->weight.dtype());
}

Tensor GPT::lm_head_weight() const { return lm_head ? lm_head->weight : transformer->wte->weight; }

Tensor GPT::embed(const Tensor& tokens, std::int64_t first_position) {
  const std::int64_t T = tokens.shape()[1];
  std::vector<std::int64_t> pos(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) pos[static_cast<std::size_t>(t)] = first_position + t;
  const Tensor tok_emb = transformer->wte->forward(tokens);                            // (B, T, C)
  const Tensor pos_emb = transformer->wpe->forward(Tensor::from_ints(pos, {T}));       // (T, C)
  return transformer->drop->forward(tok_emb + pos_emb);
}

Tensor GPT::head(const Tensor& x) const {
  // (B, T, C) -> (B, T, V)
  return ops::linear(transformer->ln_f->forward(x), lm_head_weight());
}

Tensor GPT::forward(const Tensor& tokens, const Tensor& valid_lens) {
  // tokens: (B, T) int64
  if (tokens.dim() != 2 || tokens.dtype() != DType::i64 || tokens.shape()[1] > config.block_size ||
      tokens.shape()[1] < 1)
    throw std::invalid_argument(fmt::format("GPT: tokens must be int64 (batch, 1 <= T <= block_size = {}), got {} {}",
                                            config.block_size, dtype_name(tokens.dtype()), tokens.shape()));
  Tensor x = embed(tokens, 0);                                    // (B, T, C)
  for (auto& block : transformer->h) x = block->forward(x, valid_lens); // (B, T, C)
  return head(x);                                                 // (B, T, V)
}

void GPT::keep_attention_weights(bool on) {
  for (auto& block : transformer->h) block->attn->weights.keep = on;
}

std::vector<Tensor> GPT::attention_weights() const {
  std::vector<Tensor> out;
  for (const auto& block : transformer->h) out.push_back(block->attn->weights.get("GPT::attention_weights"));
  return out;
}

} // namespace headgrad::models
