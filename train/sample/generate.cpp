#include "train/sample/generate.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

#include "framework/core/autograd.hpp"

namespace headgrad::models {

std::int64_t window_start(std::int64_t start, std::int64_t length, std::int64_t block_size) {
  if (length - start <= block_size) return start;
  return length - std::max<std::int64_t>(1, block_size / 2);
}

namespace {

Tensor tokens_tensor(const std::vector<std::int64_t>& tokens, std::int64_t first, std::int64_t end) {
  return Tensor::from_ints(std::vector<std::int64_t>(tokens.begin() + first, tokens.begin() + end), {1, end - first});
}

} // namespace

void generate_streaming(GPT& model, const std::vector<std::int64_t>& prompt, const GenerateOptions& o, Generator& gen,
                        const std::function<void(std::int64_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt needs at least one token");
  for (std::int64_t t : prompt)
    if (t < 0 || t >= model.config.vocab)
      throw std::invalid_argument(fmt::format("generate: prompt token {} is outside the vocabulary [0, {})", t,
                                              model.config.vocab));
  if (o.tokens < 0) throw std::invalid_argument(fmt::format("generate: tokens must be >= 0, got {}", o.tokens));
  NoGradGuard ng;
  const bool was_training = model.training();
  model.eval();
  const std::int64_t block = model.config.block_size;
  // The text is tokens 0, 1, ..., end - 1 (the prompt, then what was drawn); `window` holds only
  // tokens [base, end): those before the window's start are dropped when it jumps.
  std::vector<std::int64_t> window = prompt;
  std::int64_t base = 0;
  // the first prompt token the model sees: a prompt longer than block_size keeps its last block_size
  std::int64_t start = std::max<std::int64_t>(0, static_cast<std::int64_t>(prompt.size()) - block);
  KVCache cache;
  std::int64_t cache_start = -1; // the cache holds tokens [cache_start, cache_start + cache.length)
  auto tokens = [&](std::int64_t first, std::int64_t end) { return tokens_tensor(window, first - base, end - base); };
  for (std::int64_t n = 0; n < o.tokens; ++n) {
    const std::int64_t end = base + static_cast<std::int64_t>(window.size());
    start = window_start(start, end, block);
    if (start > base) { // what is before the window is never read again
      window.erase(window.begin(), window.begin() + (start - base));
      base = start;
    }
    Tensor logits; // (1, Tn, V): the last position predicts the next token
    if (o.kv_cache) {
      if (cache_start != start) { // a new window: refill the cache with it
        cache = new_cache(model, 1);
        cache_start = start;
      }
      logits = forward_cached(model, tokens(cache_start + cache.length, end), cache);
    } else {
      logits = model.forward(tokens(start, end));
    }
    const std::int64_t Tn = logits.shape()[1];
    const std::int64_t next = ops::sample_logits(logits.slice(1, Tn - 1, Tn), o.sample, gen).to_int_vector().front();
    window.push_back(next);
    if (on_token) on_token(next);
  }
  model.train(was_training);
}

std::vector<std::int64_t> generate(GPT& model, const std::vector<std::int64_t>& prompt, const GenerateOptions& o,
                                   Generator& gen, const std::function<void(std::int64_t)>& on_token) {
  std::vector<std::int64_t> out;
  generate_streaming(model, prompt, o, gen, [&](std::int64_t t) {
    out.push_back(t);
    if (on_token) on_token(t);
  });
  return out;
}

} // namespace headgrad::models
