// windows.hpp - batches of windows of a token stream, nanoGPT's get_batch: row r holds the T
// tokens at starts[r] and, as its targets, the T tokens one further on. The text corpus
// (data/text.hpp) and the token files (data/token_files.hpp) cut their streams this way.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "data/tasks.hpp"
#include "framework/core/random.hpp"

namespace headgrad::data {

// `count` window offsets drawn uniformly from [first, first + span - context), where `span`
// tokens from `first` on are available: the window and its target, one token further on, fit.
std::vector<std::int64_t> window_offsets(Generator& gen, std::int64_t first, std::int64_t span, std::int64_t context,
                                         std::int64_t count);

// Writes the context + 1 tokens data[o : o + context + 1] of the stream to `out`.
using ReadWindow = std::function<void(std::int64_t o, std::int64_t* out)>;

// The batch of windows at `starts`: tokens (B, T) and targets (B, T) with T = context, every
// row valid in full (valid_lens T). Reads each window, and its target, once with `read`.
Batch window_batch(const std::vector<std::int64_t>& starts, std::int64_t context, const ReadWindow& read);

} // namespace headgrad::data
