// sampling.hpp - drawing category indices: torch.multinomial over rows of probabilities, and the
// temperature / top-k sampling of a language model's generation loop (Holtzman et al., "The
// Curious Case of Neural Text Degeneration", 2020, section 3, describe both). The results are
// int64 indices and carry no gradient (as framework/ops/compare.hpp's ops).
//
// Every draw takes exactly one number from the Generator (framework/core/random.hpp: the same stream
// on every machine and compiler) and the arithmetic is in double, so a seed gives the same
// indices everywhere. Rows are drawn in row-major order; greedy sampling draws nothing.
// Bad input throws std::invalid_argument naming the function and the shape.
#pragma once
#include <cstdint>
#include <optional>

#include "framework/core/random.hpp"
#include "framework/core/tensor.hpp"

namespace headgrad::ops {

// torch.multinomial(probs, num_samples, replacement, generator): probs is (categories) or
// (rows, categories), float32 or float64, every entry finite and >= 0, every row with a positive
// sum (it need not be 1: entries are weights). The result is int64 (num_samples) or
// (rows, num_samples). With replacement the draws of a row are independent; without, each draw
// is proportional to the weights not drawn yet, so num_samples may not exceed a row's count of
// nonzero weights.
Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement, Generator& gen);

struct SampleOptions {
  // Logits are divided by it before the softmax: > 0; 0 means greedy (the argmax, first index on
  // ties, as ops::argmax), which draws nothing from the generator.
  double temperature = 1.0;
  // Keep only the k largest logits of each row (ties to the lower index, as ops::topk);
  // 1 <= k <= the row length.
  std::optional<std::int64_t> top_k;
};

// One index per row of the last axis, drawn from softmax(logits / temperature) restricted to the
// top-k: logits (..., V) float32/float64 -> int64 (...). A logit of -inf excludes its index; NaN
// and +inf are refused, and so is a row with no finite logit.
Tensor sample_logits(const Tensor& logits, const SampleOptions& options, Generator& gen);

} // namespace headgrad::ops
