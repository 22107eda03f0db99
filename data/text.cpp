// text.cpp - the tokenizers, reading and splitting a corpus, and its batches of windows.
#include "data/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "framework/random.hpp"

namespace headgrad::data {
namespace {

// The code point starting at s[i] and its length in bytes, or length 0 for an invalid sequence
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::pair<char32_t, int> decode_utf8(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1};
  int len = 0;
  char32_t cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) len = 2, cp = b0 & 0x1F, min = 0x80;
  else if ((b0 & 0xF0) == 0xE0) len = 3, cp = b0 & 0x0F, min = 0x800;
  else if ((b0 & 0xF8) == 0xF0) len = 4, cp = b0 & 0x07, min = 0x10000;
  else return {0, 0};
  if (i + static_cast<std::size_t>(len) > s.size()) return {0, 0};
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if ((b & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, len};
}

std::string encode_utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// Calls fn(code point) for each character of `text`; throws naming the first invalid byte.
template <typename Fn> void for_each_char(std::string_view text, const std::string& source, Fn&& fn) {
  for (std::size_t i = 0; i < text.size();) {
    const auto [cp, len] = decode_utf8(text, i);
    if (len == 0)
      throw std::invalid_argument(fmt::format("{} is not UTF-8 text (invalid byte 0x{:02x} at offset {}); "
                                              "--tokenizer bytes reads any text",
                                              source, static_cast<unsigned char>(text[i]), i));
    fn(cp);
    i += static_cast<std::size_t>(len);
  }
}

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::invalid_argument(fmt::format("--text {}: is a directory, not a text file", path));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument(fmt::format("--text {}: cannot read ({})", path, std::strerror(errno)));
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The default corpus: every regular file of kDefaultCorpusDir that is not an index (.dat) or a
// link (the .u8 names link to the same files), in name order, one after the other.
std::string read_default_corpus() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(kDefaultCorpusDir, ec))
    throw std::invalid_argument(fmt::format("the default corpus {} is missing: install Debian's fortunes package "
                                            "(./dev.sh deps) or give --text FILE",
                                            kDefaultCorpusDir));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kDefaultCorpusDir, ec))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& p : files) text += read_whole_file(p.string());
  return text;
}

// Window offsets: `count` uniform draws from [0, span - context) where span tokens are available
// (so that the window and its one-token-later target fit).
std::vector<std::int64_t> offsets(Generator& gen, std::int64_t first, std::int64_t span, std::int64_t context,
                                  std::int64_t count) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  const auto choices = static_cast<std::uint64_t>(span - context);
  for (auto& o : out) o = first + static_cast<std::int64_t>(gen.below(choices));
  return out;
}

Batch windows(const TextCorpus& corpus, std::int64_t context, const std::vector<std::int64_t>& starts) {
  const auto B = static_cast<std::int64_t>(starts.size()), T = context;
  Batch b;
  b.tokens = new_tensor({B, T}, DType::i64);
  b.targets = new_tensor({B, T}, DType::i64);
  b.valid_lens = Tensor::full({B}, static_cast<double>(T), DType::i64);
  b.valid_tokens = B * T;
  std::int64_t* x = b.tokens.data<std::int64_t>();
  std::int64_t* y = b.targets.data<std::int64_t>();
  for (std::int64_t r = 0; r < B; ++r) {
    const std::int32_t* src = corpus.tokens.data() + starts[static_cast<std::size_t>(r)];
    std::copy(src, src + T, x + r * T);     // x = data[o : o + T]
    std::copy(src + 1, src + T + 1, y + r * T); // y = data[o + 1 : o + T + 1]
  }
  return b;
}

void check_context(const TextCorpus& corpus, std::int64_t context, const char* op) {
  if (context < 1 || corpus.train_tokens <= context || corpus.validation_tokens() <= context)
    throw std::invalid_argument(fmt::format("{}: windows of {} tokens do not fit the corpus splits ({} and {} tokens)",
                                            op, context, corpus.train_tokens, corpus.validation_tokens()));
}

} // namespace

TokenizerKind parse_tokenizer(const std::string& name) {
  if (name == "chars") return TokenizerKind::chars;
  if (name == "bytes") return TokenizerKind::bytes;
  throw std::invalid_argument(fmt::format("unknown tokenizer '{}' (valid: chars, bytes)", name));
}

const char* tokenizer_name(TokenizerKind kind) { return kind == TokenizerKind::bytes ? "bytes" : "chars"; }

Tokenizer Tokenizer::chars_of(std::string_view text) {
  std::vector<bool> seen_ascii(128, false);
  std::vector<char32_t> others;
  for_each_char(text, "the text", [&](char32_t cp) {
    if (cp < 128) seen_ascii[cp] = true;
    else others.push_back(cp);
  });
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  Tokenizer t;
  t.kind_ = TokenizerKind::chars;
  for (char32_t c = 0; c < 128; ++c)
    if (seen_ascii[c]) t.chars_.push_back(c);
  t.chars_.insert(t.chars_.end(), others.begin(), others.end());
  t.ascii_.assign(128, -1);
  for (std::size_t i = 0; i < t.chars_.size() && t.chars_[i] < 128; ++i) t.ascii_[t.chars_[i]] = static_cast<std::int32_t>(i);
  return t;
}

Tokenizer Tokenizer::bytes() {
  Tokenizer t;
  t.kind_ = TokenizerKind::bytes;
  return t;
}

Tokenizer Tokenizer::from_vocabulary(TokenizerKind kind, std::string_view vocabulary) {
  if (kind == TokenizerKind::bytes) {
    if (!vocabulary.empty()) throw std::invalid_argument("a byte tokenizer has no stored vocabulary");
    return bytes();
  }
  Tokenizer t = chars_of(vocabulary);
  if (t.vocabulary() != vocabulary)
    throw std::invalid_argument("a character vocabulary must list distinct characters in code point order");
  return t;
}

std::int64_t Tokenizer::size() const {
  return kind_ == TokenizerKind::bytes ? 256 : static_cast<std::int64_t>(chars_.size());
}

std::string Tokenizer::vocabulary() const {
  std::string out;
  if (kind_ == TokenizerKind::chars)
    for (char32_t c : chars_) out += encode_utf8(c);
  return out;
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int64_t> out;
  out.reserve(text.size());
  if (kind_ == TokenizerKind::bytes) {
    for (char c : text) out.push_back(static_cast<unsigned char>(c));
    return out;
  }
  for_each_char(text, "the text", [&](char32_t cp) {
    std::int64_t id = -1;
    if (cp < 128) {
      id = ascii_[cp];
    } else if (auto it = std::lower_bound(chars_.begin(), chars_.end(), cp); it != chars_.end() && *it == cp) {
      id = it - chars_.begin();
    }
    if (id < 0)
      throw std::invalid_argument(fmt::format("the character '{}' (U+{:04X}) is not in the model's vocabulary of {} "
                                              "characters",
                                              encode_utf8(cp), static_cast<std::uint32_t>(cp), chars_.size()));
    out.push_back(id);
  });
  return out;
}

std::string Tokenizer::decode(std::int64_t token) const {
  if (token < 0 || token >= size())
    throw std::out_of_range(fmt::format("token {} is outside the vocabulary [0, {})", token, size()));
  if (kind_ == TokenizerKind::bytes) return std::string(1, static_cast<char>(token));
  return encode_utf8(chars_[static_cast<std::size_t>(token)]);
}

std::string Tokenizer::decode(const std::vector<std::int64_t>& tokens) const {
  std::string out;
  for (std::int64_t t : tokens) out += decode(t);
  return out;
}

std::string Utf8Stream::push(std::string_view bytes) {
  pending_ += bytes;
  std::string out;
  std::size_t i = 0;
  while (i < pending_.size()) {
    const auto b0 = static_cast<unsigned char>(pending_[i]);
    const std::size_t need = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 1;
    if (i + need > pending_.size()) {
      // wait for the rest, unless a byte already there cannot continue this character
      bool can_continue = true;
      for (std::size_t k = i + 1; k < pending_.size(); ++k)
        can_continue = can_continue && (static_cast<unsigned char>(pending_[k]) & 0xC0) == 0x80;
      if (can_continue) break;
    }
    const auto [cp, len] = decode_utf8(pending_, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD for one invalid byte
      i += 1;
    } else {
      out.append(pending_, i, static_cast<std::size_t>(len));
      i += static_cast<std::size_t>(len);
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out = pending_.empty() ? "" : "\xEF\xBF\xBD";
  pending_.clear();
  return out;
}

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

TextCorpus text_corpus_of(std::string text, TokenizerKind kind, std::int64_t context, const std::string& source) {
  if (text.empty()) throw std::invalid_argument(fmt::format("{} is empty", source));
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    throw std::invalid_argument(fmt::format("{} looks binary (a NUL byte at offset {}); give a text file", source, nul));
  TextCorpus c;
  c.source = source;
  c.fingerprint = fnv1a64(text);
  try {
    c.tokenizer = kind == TokenizerKind::bytes ? Tokenizer::bytes() : Tokenizer::chars_of(text);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw std::invalid_argument(source + what.substr(std::string("the text").size()));
  }
  const std::vector<std::int64_t> ids = c.tokenizer.encode(text);
  c.tokens.assign(ids.begin(), ids.end());
  const auto n = static_cast<std::int64_t>(c.tokens.size());
  c.train_tokens = n * 9 / 10; // prepare.py: train = data[:int(n*0.9)]
  // Each split needs a window of `context` tokens and the one after it.
  const std::int64_t need = 10 * (context + 1);
  if (c.train_tokens <= context || c.validation_tokens() <= context)
    throw std::invalid_argument(fmt::format("{} is too short: {} {} for --context {} (the validation split, the last "
                                            "10%, needs {} tokens; about {} in all)",
                                            source, n, kind == TokenizerKind::bytes ? "bytes" : "characters", context,
                                            context + 1, need));
  return c;
}

TextCorpus load_text_corpus(const std::string& path, TokenizerKind kind, std::int64_t context) {
  if (path.empty()) return text_corpus_of(read_default_corpus(), kind, context, kDefaultCorpusDir);
  return text_corpus_of(read_whole_file(path), kind, context, "--text " + path);
}

std::vector<std::int64_t> text_batch_offsets(const TextCorpus& corpus, std::int64_t context, std::uint64_t seed,
                                             std::uint64_t index, std::int64_t batch_size) {
  check_context(corpus, context, "make_text_batch");
  if (batch_size < 1)
    throw std::invalid_argument(fmt::format("make_text_batch: batch_size must be at least 1, got {}", batch_size));
  Generator gen(mix_seed(seed, index));
  return offsets(gen, 0, corpus.train_tokens, context, batch_size);
}

Batch make_text_batch(const TextCorpus& corpus, std::int64_t context, std::uint64_t seed, std::uint64_t index,
                      std::int64_t batch_size) {
  return windows(corpus, context, text_batch_offsets(corpus, context, seed, index, batch_size));
}

std::vector<std::int64_t> text_eval_offsets(const TextCorpus& corpus, std::int64_t context, std::int64_t count) {
  check_context(corpus, context, "make_text_eval_set");
  if (count < 1) throw std::invalid_argument(fmt::format("make_text_eval_set: count must be at least 1, got {}", count));
  Generator gen(kEvalSeed);
  return offsets(gen, corpus.train_tokens, corpus.validation_tokens(), context, count);
}

Batch make_text_eval_set(const TextCorpus& corpus, std::int64_t context, std::int64_t count) {
  return windows(corpus, context, text_eval_offsets(corpus, context, count));
}

} // namespace headgrad::data
