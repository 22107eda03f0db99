// text_data.hpp - characters as tokens: the vocabulary of a text, its encoding, and batches of
// random windows for next-character prediction.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <headgrad/framework/core/random.hpp>
#include <headgrad/framework/core/tensor.hpp>

namespace char_lm {

// The distinct bytes of a text, sorted: token i is chars[i].
struct Vocabulary {
  std::string chars;
  explicit Vocabulary(const std::string& text);
  std::int64_t size() const { return static_cast<std::int64_t>(chars.size()); }
  std::vector<std::int64_t> encode(const std::string& text) const; // throws on a byte not in it
  std::string decode(const std::vector<std::int64_t>& tokens) const;
};

// Reads a whole file; std::runtime_error naming it if it cannot be read or is empty.
std::string read_text(const std::string& path);

struct Batch {
  headgrad::Tensor inputs;  // (B, T) int64: text[s .. s + T)
  headgrad::Tensor targets; // (B, T) int64: text[s + 1 .. s + T + 1), the next characters
};
// `batch` windows of `context` + 1 tokens starting at uniform positions of `tokens`.
Batch random_windows(const std::vector<std::int64_t>& tokens, std::int64_t batch, std::int64_t context,
                     headgrad::Generator& gen);
// The consecutive windows of `tokens` (stride `context`), as one batch: an evaluation set.
Batch all_windows(const std::vector<std::int64_t>& tokens, std::int64_t context);

} // namespace char_lm
