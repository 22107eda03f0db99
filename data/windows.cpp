#include "data/windows.hpp"

#include <algorithm>

namespace headgrad::data {

std::vector<std::int64_t> window_offsets(Generator& gen, std::int64_t first, std::int64_t span, std::int64_t context,
                                         std::int64_t count) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  const auto choices = static_cast<std::uint64_t>(span - context);
  for (auto& o : out) o = first + static_cast<std::int64_t>(gen.below(choices));
  return out;
}

Batch window_batch(const std::vector<std::int64_t>& starts, std::int64_t context, const ReadWindow& read) {
  const auto B = static_cast<std::int64_t>(starts.size()), T = context;
  Batch b;
  b.tokens = new_tensor({B, T}, DType::i64);
  b.targets = new_tensor({B, T}, DType::i64);
  b.valid_lens = Tensor::full({B}, static_cast<double>(T), DType::i64);
  b.valid_tokens = B * T;
  std::int64_t* x = b.tokens.data<std::int64_t>();
  std::int64_t* y = b.targets.data<std::int64_t>();
  std::vector<std::int64_t> window(static_cast<std::size_t>(T + 1));
  for (std::int64_t r = 0; r < B; ++r) {
    read(starts[static_cast<std::size_t>(r)], window.data()); // data[o : o + T + 1]
    std::copy(window.begin(), window.end() - 1, x + r * T);    // x = data[o : o + T]
    std::copy(window.begin() + 1, window.end(), y + r * T);    // y = data[o + 1 : o + T + 1]
  }
  return b;
}

} // namespace headgrad::data
