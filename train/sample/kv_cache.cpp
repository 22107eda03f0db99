#include "train/sample/kv_cache.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

#include "framework/core/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::models {
namespace {

// Copies src (B, Tn, C), a column block of a contiguous (B, Tn, row) buffer starting at column
// `col`, into rows [past, past + Tn) of the cache dst (B, capacity, C).
void write_cache(Tensor& dst, const Tensor& src_buf, std::int64_t col, std::int64_t past) {
  const std::int64_t B = dst.shape()[0], cap = dst.shape()[1], C = dst.shape()[2];
  const std::int64_t Tn = src_buf.shape()[1], row = src_buf.shape()[2];
  dispatch_float(dst.dtype(), "kv_cache", [&]<typename T>() {
    const T* s = src_buf.data<T>();
    T* d = dst.data<T>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < Tn; ++t)
        std::copy(s + (b * Tn + t) * row + col, s + (b * Tn + t) * row + col + C, d + (b * cap + past + t) * C);
  });
}

// x (B, Tn, C) at positions past .. past + Tn - 1: writes their keys and values into the layer's
// cache (B, block_size, C), attends over positions [0, past + Tn) and returns residual plus the
// projected result (CausalSelfAttention::forward_add on the cache).
Tensor attention_cached(const CausalSelfAttention& attn, const Tensor& x, Tensor& cache_keys, Tensor& cache_values,
                        std::int64_t past, const Tensor& residual) {
  // x: (B, Tn, C); qkv: (B, Tn, 3C)
  const Tensor qkv = attn.c_attn->forward(x).contiguous();
  const std::int64_t B = qkv.shape()[0], Tn = qkv.shape()[1], C = attn.n_embd;
  write_cache(cache_keys, qkv, C, past);
  write_cache(cache_values, qkv, 2 * C, past);
  // the new queries against every cached position: query i (position past + i) keeps keys 0 .. past + i
  const Tensor q = qkv.slice(2, 0, C).contiguous();                              // (B, Tn, C)
  const Tensor k = cache_keys.slice(1, 0, past + Tn), v = cache_values.slice(1, 0, past + Tn); // (B, past + Tn, C)
  std::vector<std::int64_t> lens(static_cast<std::size_t>(B * Tn));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Tn; ++i) lens[static_cast<std::size_t>(b * Tn + i)] = past + i + 1;
  ops::AttentionMask mask;
  mask.valid_lens = Tensor::from_ints(lens, {B, Tn});
  return ops::linear_residual(ops::attention(q, k, v, attn.n_head, mask), attn.c_proj->weight, attn.c_proj->bias,
                              residual);
}

// Block::forward with the attention on the cache.
Tensor block_cached(const Block& block, const Tensor& x, Tensor& cache_keys, Tensor& cache_values, std::int64_t past) {
  const Tensor y = attention_cached(*block.attn, block.ln_1->forward(x), cache_keys, cache_values, past, x);
  return block.mlp->forward_add(block.ln_2->forward(y), y);
}

} // namespace

KVCache new_cache(const GPT& model, std::int64_t batch) {
  if (batch < 1) throw std::invalid_argument(fmt::format("new_cache: batch must be at least 1, got {}", batch));
  KVCache c;
  const GPTConfig& config = model.config;
  const DType dtype = model.transformer->wte->weight.dtype();
  for (std::int64_t i = 0; i < config.layers; ++i) {
    c.keys.push_back(Tensor::zeros({batch, config.block_size, config.d_model}, dtype));
    c.values.push_back(Tensor::zeros({batch, config.block_size, config.d_model}, dtype));
  }
  return c;
}

Tensor forward_cached(GPT& model, const Tensor& tokens, KVCache& cache) {
  const GPTConfig& config = model.config;
  if (tokens.dim() != 2 || tokens.dtype() != DType::i64 || tokens.shape()[1] < 1 || cache.keys.size() !=
      static_cast<std::size_t>(config.layers) || tokens.shape()[0] != cache.keys.front().shape()[0])
    throw std::invalid_argument(fmt::format("forward_cached: tokens must be int64 (batch, Tn >= 1) for a cache "
                                            "of the model's {} layers and its batch, got {} {}",
                                            config.layers, dtype_name(tokens.dtype()), tokens.shape()));
  const std::int64_t past = cache.length, Tn = tokens.shape()[1];
  if (past + Tn > cache.capacity())
    throw std::invalid_argument(fmt::format("forward_cached: {} cached + {} new positions pass block_size {}",
                                            past, Tn, cache.capacity()));
  NoGradGuard ng;
  const bool was_training = model.training();
  model.eval();
  Tensor x = model.embed(tokens, past); // (B, Tn, C) at positions past .. past + Tn - 1
  for (std::size_t l = 0; l < model.transformer->h.size(); ++l)
    x = block_cached(*model.transformer->h[l], x, cache.keys[l], cache.values[l], past);
  model.train(was_training);
  cache.length = past + Tn;
  return model.head(x); // (B, Tn, V)
}

} // namespace headgrad::models
