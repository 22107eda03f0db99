// stack_config.hpp - the sizes and settings both attention models share, d2l's Transformer encoder
// (models/transformer.hpp, ModelConfig) and nanoGPT's decoder (models/gpt.hpp, GPTConfig), and the
// one check of them.
#pragma once
#include <cstdint>

#include "models/attention.hpp"

namespace headgrad::models {

struct StackConfig {
  std::int64_t vocab = 16, d_model = 64, heads = 4, layers = 2, ffn = 128;
  double dropout = 0.0;
  AttentionPath attention = AttentionPath::fused; // same parameters and results either way
};

// How a message names each field: the struct's names, or e.g. the command line's flags.
struct StackFieldNames {
  const char *vocab = "vocab", *d_model = "d_model", *heads = "heads", *layers = "layers", *ffn = "ffn",
             *dropout = "dropout";
};

// Every size positive, heads dividing d_model (each head takes d_model / heads of the width),
// dropout in [0, 1). Throws std::invalid_argument naming the field: "d_model (30) must be
// divisible by heads (4)".
void validate_stack(const StackConfig& config, const StackFieldNames& names = {});

} // namespace headgrad::models
