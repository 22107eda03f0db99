// text_data.cpp - see text_data.hpp.
#include "text_data.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace char_lm {

using headgrad::Tensor;

Vocabulary::Vocabulary(const std::string& text) : chars(text) {
  std::sort(chars.begin(), chars.end());
  chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
}

std::vector<std::int64_t> Vocabulary::encode(const std::string& text) const {
  std::vector<std::int64_t> tokens;
  tokens.reserve(text.size());
  for (char c : text) {
    const auto at = chars.find(c);
    if (at == std::string::npos) throw std::invalid_argument(std::string("encode: character not in the vocabulary: ") + c);
    tokens.push_back(static_cast<std::int64_t>(at));
  }
  return tokens;
}

std::string Vocabulary::decode(const std::vector<std::int64_t>& tokens) const {
  std::string text;
  for (std::int64_t t : tokens) text += chars.at(static_cast<std::size_t>(t));
  return text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  if (!in || content.str().empty()) throw std::runtime_error(path + ": cannot read it, or it is empty");
  return content.str();
}

namespace {

Batch windows_at(const std::vector<std::int64_t>& tokens, const std::vector<std::size_t>& starts, std::int64_t context) {
  std::vector<std::int64_t> inputs, targets;
  for (std::size_t s : starts) {
    inputs.insert(inputs.end(), tokens.begin() + static_cast<std::ptrdiff_t>(s),
                  tokens.begin() + static_cast<std::ptrdiff_t>(s) + context);
    targets.insert(targets.end(), tokens.begin() + static_cast<std::ptrdiff_t>(s) + 1,
                   tokens.begin() + static_cast<std::ptrdiff_t>(s) + context + 1);
  }
  const std::int64_t rows = static_cast<std::int64_t>(starts.size());
  return {Tensor::from_ints(inputs, {rows, context}), Tensor::from_ints(targets, {rows, context})};
}

} // namespace

Batch random_windows(const std::vector<std::int64_t>& tokens, std::int64_t batch, std::int64_t context,
                     headgrad::Generator& gen) {
  if (static_cast<std::int64_t>(tokens.size()) <= context)
    throw std::invalid_argument("random_windows: the text is not longer than one window");
  std::vector<std::size_t> starts;
  for (std::int64_t b = 0; b < batch; ++b)
    starts.push_back(static_cast<std::size_t>(gen.below(tokens.size() - static_cast<std::size_t>(context))));
  return windows_at(tokens, starts, context);
}

Batch all_windows(const std::vector<std::int64_t>& tokens, std::int64_t context) {
  std::vector<std::size_t> starts;
  for (std::size_t s = 0; s + static_cast<std::size_t>(context) < tokens.size(); s += static_cast<std::size_t>(context))
    starts.push_back(s);
  if (starts.empty()) throw std::invalid_argument("all_windows: the text is not longer than one window");
  return windows_at(tokens, starts, context);
}

} // namespace char_lm
