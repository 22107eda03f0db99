// generate.hpp - text generation from the causal language model (gpt.hpp): nanoGPT's
// GPT.generate loop (model.py: crop the context to block_size, logits of the last position,
// temperature and top-k, one draw, append), with ops::sample_logits drawing each token.
//
// The context window. nanoGPT slides it one token at a time past block_size, which a key/value
// cache cannot follow (positions are absolute: after a slide every cached key belongs to another
// position). Here the window is tokens [start, end): when a new token would make it longer than
// block_size, start jumps to keep the last block_size / 2 tokens (at least 1), so each token is
// predicted from between block_size / 2 and block_size tokens of context. With the cache, a jump
// refills it with those tokens in one forward; between jumps each new token costs one position.
// Without the cache, every token is a full forward over the window - the same window, so both
// give the same logits up to rounding, and greedy decoding (temperature 0) the same text.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "framework/core/random.hpp"
#include "models/gpt.hpp"
#include "train/sample/kv_cache.hpp"
#include "train/sample/sampling.hpp"

namespace headgrad::models {

struct GenerateOptions {
  std::int64_t tokens = 256;        // new tokens to generate (>= 0)
  ops::SampleOptions sample;        // temperature (0 = greedy) and top-k, as ops::sample_logits
  bool kv_cache = true;             // false: a full forward over the window for every token
};

// The first token of the window that predicts the next token after `length` tokens, given the
// window started at `start` so far (the rule above). block_size >= 1.
std::int64_t window_start(std::int64_t start, std::int64_t length, std::int64_t block_size);

// Continues `prompt` (at least one token, each in [0, vocab)) by options.tokens tokens drawn from
// `gen`, calling on_token with each as soon as it is drawn (streaming); returns the new tokens.
// Runs in eval mode without a graph (the model's mode is restored). Throws std::invalid_argument
// for an empty prompt or a token outside the vocabulary, naming it.
std::vector<std::int64_t> generate(GPT& model, const std::vector<std::int64_t>& prompt, const GenerateOptions& options,
                                   Generator& gen, const std::function<void(std::int64_t)>& on_token = {});

// The same tokens, each handed to on_token and not kept: only the model's window (at most
// block_size tokens) and its cache are held, so memory does not grow with options.tokens
// (`headgrad sample --tokens 100000000` streams in constant memory).
void generate_streaming(GPT& model, const std::vector<std::int64_t>& prompt, const GenerateOptions& options,
                        Generator& gen, const std::function<void(std::int64_t)>& on_token);

} // namespace headgrad::models
