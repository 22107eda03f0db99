// tiny_models.hpp - the tiny models and runs the tests build: a ModelConfig (d2l's encoder) or a
// GPTConfig (nanoGPT's decoder) from the sizes both share, given as a models::StackConfig with
// designated initialisers, plus the one length of its own; the names and shapes of the encoder's
// PyTorch state_dict; and a tiny run of the text task. (A train::RunConfig is an aggregate: tests
// write a toy task's run with designated initialisers.)
//
//   const models::GPTConfig c = tiny::gpt({.vocab = 11, .d_model = 8, .heads = 2, .layers = 2, .ffn = 16}, 8);
#pragma once
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <utility>
#include <vector>

#include "models/gpt.hpp"
#include "models/stack_config.hpp"
#include "models/transformer.hpp"
#include "train/run/train_options.hpp"

namespace tiny {

// A field `sizes` leaves out takes StackConfig's default (dropout 0, fused attention), not the
// model config's: GPTConfig's own defaults are nanoGPT's CPU size, far from tiny.
inline headgrad::models::ModelConfig encoder(const headgrad::models::StackConfig& sizes, std::int64_t max_len) {
  headgrad::models::ModelConfig c;
  static_cast<headgrad::models::StackConfig&>(c) = sizes;
  c.max_len = max_len;
  return c;
}
inline headgrad::models::GPTConfig gpt(const headgrad::models::StackConfig& sizes, std::int64_t block_size) {
  headgrad::models::GPTConfig c;
  static_cast<headgrad::models::StackConfig&>(c) = sizes;
  c.block_size = block_size;
  return c;
}

// The names and shapes a PyTorch state_dict of d2l's encoder + output layer has (use_bias=False
// in the attention projections), in registration order.
inline std::vector<std::pair<std::string, headgrad::Dims>> encoder_state_dict(const headgrad::models::ModelConfig& c) {
  const std::int64_t d = c.d_model, f = c.ffn, V = c.vocab;
  std::vector<std::pair<std::string, headgrad::Dims>> out = {{"embedding.weight", {V, d}}};
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string b = fmt::format("blks.{}.", i);
    for (const char* w : {"W_q", "W_k", "W_v", "W_o"}) out.push_back({b + "attention." + w + ".weight", {d, d}});
    out.push_back({b + "addnorm1.ln.weight", {d}});
    out.push_back({b + "addnorm1.ln.bias", {d}});
    out.push_back({b + "ffn.dense1.weight", {f, d}});
    out.push_back({b + "ffn.dense1.bias", {f}});
    out.push_back({b + "ffn.dense2.weight", {d, f}});
    out.push_back({b + "ffn.dense2.bias", {d}});
    out.push_back({b + "addnorm2.ln.weight", {d}});
    out.push_back({b + "addnorm2.ln.bias", {d}});
  }
  out.push_back({"dense.weight", {V, d}});
  out.push_back({"dense.bias", {V}});
  return out;
}

// `headgrad train --task text` on the corpus `text` at a tiny size - d_model 16, 2 heads, 1 layer,
// ffn 32, context 16, batch 8, lr 1e-2 after 10 warmup steps, the rest text_defaults()' - for
// `steps` steps into out_dir: one thread, no progress lines, evaluated at the end on eval_count
// windows.
inline headgrad::train::TrainOptions text_training(const std::string& text, std::int64_t steps,
                                                   const std::string& out_dir, std::int64_t eval_count) {
  headgrad::train::TrainOptions o;
  o.run = headgrad::train::RunConfig::text_defaults();
  headgrad::train::RunConfig& c = o.run;
  c.text = text;
  c.d_model = 16, c.heads = 2, c.layers = 1, c.ffn = 32, c.context = 16;
  c.batch = 8, c.lr = 1e-2, c.warmup = 10, c.steps = steps;
  o.eval_every = 0;
  o.eval_count = eval_count;
  o.out_dir = out_dir;
  o.threads = 1;
  o.quiet = true;
  return o;
}

} // namespace tiny
