// kv_cache.hpp - the key/value cache of generation (generate.hpp): every layer of a GPT
// (models/gpt.hpp) keeps the keys and values of the positions seen so far, so a new token costs
// one position (its query against the cache) instead of a forward over the whole context.
//
// forward_cached runs the model's own modules on the new positions (embeddings, ln_1, c_attn,
// c_proj, the MLP, ln_f, lm_head) and differs from GPT::forward only in attention: the new keys and
// values are written into the cache, and the new queries attend to every cached position up to
// their own, through the fused attention op (ops::attention) with one valid length per query.
#pragma once
#include <cstdint>
#include <vector>

#include "models/gpt.hpp"

namespace headgrad::models {

// The keys and values every layer has seen, for positions [0, length) of a batch of sequences.
struct KVCache {
  std::vector<Tensor> keys, values; // per layer (B, block_size, d_model), heads side by side
  std::int64_t length = 0;          // positions filled
  std::int64_t capacity() const { return keys.empty() ? 0 : keys.front().shape()[1]; }
};

// An empty cache of `model` for `batch` sequences of up to block_size positions (the model's dtype).
KVCache new_cache(const GPT& model, std::int64_t batch);

// tokens (B, Tn) continue the cache's sequences: logits (B, Tn, V) for their positions
// cache.length .. cache.length + Tn - 1, each attending to every earlier position; the cache
// grows by Tn. Throws std::invalid_argument when that passes block_size. Runs without a graph
// and in eval mode (no dropout), whatever the model's mode.
Tensor forward_cached(GPT& model, const Tensor& tokens, KVCache& cache);

} // namespace headgrad::models
