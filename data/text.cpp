// text.cpp - the tokenizers, reading and splitting a corpus, and its batches of windows.
#include "data/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fcntl.h>
#include <functional>
#include <optional>
#include <stdexcept>
#include <unistd.h>

#include "framework/io/regular_file.hpp"
#include "framework/core/random.hpp"
#include "data/windows.hpp"

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

// ---- reading a corpus in pieces ----------------------------------------------------------------

constexpr std::size_t kPieceBytes = std::size_t{1} << 20; // what is read at a time

// The corpus as a stream of pieces: for_each(fn) calls fn(piece) over its bytes in order, and may
// be called again (a second pass). A file that cannot be read throws std::invalid_argument.
struct ByteSource {
  std::function<void(const std::function<void(std::string_view)>&)> for_each;
  std::uint64_t size_hint = 0; // the bytes expected (fstat), to reserve memory once
};

// Calls fn over the content of the regular file at `path`, a piece at a time, reading into `buf`.
void read_pieces(const std::string& path, std::vector<char>& buf, const std::function<void(std::string_view)>& fn) {
  // O_NONBLOCK: a FIFO is refused below instead of waiting for a writer
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::invalid_argument(fmt::format("--text {}: cannot read ({})", path, std::strerror(errno)));
  buf.resize(kPieceBytes);
  try {
    try {
      io::require_regular_file(fd, path, "a text file");
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(fmt::format("--text {}", e.what()));
    }
    (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    for (;;) {
      const ssize_t r = ::read(fd, buf.data(), buf.size());
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw std::invalid_argument(fmt::format("--text {}: cannot read ({})", path, std::strerror(errno)));
      if (r == 0) break;
      fn(std::string_view(buf.data(), static_cast<std::size_t>(r)));
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

std::uint64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::uint64_t>(n);
}

// The files one after the other, as one text.
ByteSource files_source(std::vector<std::string> paths) {
  ByteSource src;
  for (const auto& p : paths) src.size_hint += file_size(p);
  src.for_each = [paths = std::move(paths)](const std::function<void(std::string_view)>& fn) {
    std::vector<char> buf;
    for (const auto& p : paths) read_pieces(p, buf, fn);
  };
  return src;
}

ByteSource memory_source(const std::string& text) {
  return {[&text](const std::function<void(std::string_view)>& fn) { fn(text); }, text.size()};
}

// The default corpus: every regular file of kDefaultCorpusDir that is not an index (.dat) or a
// link (the .u8 names link to the same files), in name order, one after the other.
std::vector<std::string> default_corpus_files() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(kDefaultCorpusDir, ec))
    throw std::invalid_argument(fmt::format("the default corpus {} is missing: install Debian's fortunes package "
                                            "(./dev.sh deps) or give --text FILE",
                                            kDefaultCorpusDir));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(kDefaultCorpusDir, ec))
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// UTF-8 decoded a byte at a time, so that a character may straddle two pieces: RFC 3629 (no
// overlong forms, no surrogates, nothing above U+10FFFF), as decode_utf8 checks it.
class Utf8Decoder {
public:
  // Feeds the byte at `offset`; calls emit(code point) when a character is complete. False once a
  // sequence is invalid: error_offset() is where it starts and error_byte() its first byte.
  template <typename Emit> bool push(unsigned char b, std::uint64_t offset, Emit&& emit) {
    if (need_ == 0) {
      start_ = offset;
      first_ = b;
      if (b < 0x80) return emit(char32_t{b}), true;
      if ((b & 0xE0) == 0xC0) need_ = 1, cp_ = b & 0x1F, min_ = 0x80;
      else if ((b & 0xF0) == 0xE0) need_ = 2, cp_ = b & 0x0F, min_ = 0x800;
      else if ((b & 0xF8) == 0xF0) need_ = 3, cp_ = b & 0x07, min_ = 0x10000;
      else return false;
      return true;
    }
    if ((b & 0xC0) != 0x80) return false;
    cp_ = (cp_ << 6) | (b & 0x3F);
    if (--need_ > 0) return true;
    if (cp_ < min_ || cp_ > 0x10FFFF || (cp_ >= 0xD800 && cp_ <= 0xDFFF)) return false;
    emit(cp_);
    return true;
  }
  bool complete() const { return need_ == 0; } // at the end of the text: no character cut short
  std::uint64_t error_offset() const { return start_; }
  unsigned char error_byte() const { return first_; }

private:
  int need_ = 0;
  char32_t cp_ = 0, min_ = 0;
  std::uint64_t start_ = 0;
  unsigned char first_ = 0;
};

// What one pass over a text finds: its size, fingerprint, first NUL byte, and for the chars
// tokenizer its characters (count, which ones, the first invalid UTF-8 sequence).
struct Scan {
  std::uint64_t bytes = 0;
  std::uint64_t fingerprint = 0xcbf29ce484222325ull; // FNV-1a's offset basis
  std::optional<std::uint64_t> nul_at;
  std::optional<std::pair<std::uint64_t, unsigned char>> invalid_utf8; // offset, byte
  std::int64_t characters = 0;
  std::vector<bool> seen; // code point -> occurs (chars)
};

void fingerprint_piece(std::uint64_t& h, std::string_view piece) {
  for (char c : piece) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
}

void note_nul(Scan& s, std::string_view piece) {
  if (s.nul_at) return;
  if (const auto p = piece.find('\0'); p != std::string_view::npos) s.nul_at = s.bytes + p;
}

// The first pass of the chars tokenizer: the text checked and its characters collected.
Scan scan_characters(const ByteSource& src) {
  Scan s;
  s.seen.assign(0x110000, false);
  Utf8Decoder utf8;
  src.for_each([&](std::string_view piece) {
    fingerprint_piece(s.fingerprint, piece);
    note_nul(s, piece);
    for (std::size_t i = 0; i < piece.size() && !s.invalid_utf8; ++i)
      if (!utf8.push(static_cast<unsigned char>(piece[i]), s.bytes + i, [&](char32_t cp) {
            s.seen[cp] = true;
            ++s.characters;
          }))
        s.invalid_utf8.emplace(utf8.error_offset(), utf8.error_byte());
    s.bytes += piece.size();
  });
  if (!s.invalid_utf8 && !utf8.complete()) s.invalid_utf8.emplace(utf8.error_offset(), utf8.error_byte());
  return s;
}

// The second pass: the characters' tokens. The text must be the one scanned (a file changed in
// between is refused rather than giving tokens of two texts).
TokenSequence encode_characters(const ByteSource& src, const Scan& scanned, const Tokenizer& tokenizer,
                                const std::string& source) {
  TokenSequence tokens(scanned.characters, tokenizer.size());
  std::uint64_t h = 0xcbf29ce484222325ull, bytes = 0;
  std::int64_t n = 0;
  bool changed = false;
  Utf8Decoder utf8;
  src.for_each([&](std::string_view piece) {
    fingerprint_piece(h, piece);
    for (std::size_t i = 0; i < piece.size() && !changed; ++i)
      changed = !utf8.push(static_cast<unsigned char>(piece[i]), bytes + i, [&](char32_t cp) {
        const std::int64_t t = tokenizer.token_of(cp);
        if (t < 0 || n >= tokens.size()) changed = true;
        else tokens.set(n++, t);
      }) || changed;
    bytes += piece.size();
  });
  if (changed || n != scanned.characters || bytes != scanned.bytes || h != scanned.fingerprint)
    throw std::invalid_argument(fmt::format("{} changed while it was being read; try again", source));
  return tokens;
}

// The byte tokenizer's one pass: the bytes are the tokens.
TokenSequence read_bytes(const ByteSource& src, Scan& s) {
  std::vector<std::uint8_t> bytes;
  bytes.reserve(src.size_hint);
  src.for_each([&](std::string_view piece) {
    fingerprint_piece(s.fingerprint, piece);
    note_nul(s, piece);
    bytes.insert(bytes.end(), piece.begin(), piece.end());
    s.bytes += piece.size();
  });
  return TokenSequence::of_bytes(std::move(bytes));
}

TextCorpus corpus_of(const ByteSource& src, TokenizerKind kind, std::int64_t context, const std::string& source) {
  TextCorpus c;
  c.source = source;
  Scan s;
  if (kind == TokenizerKind::bytes) {
    c.tokens = read_bytes(src, s);
    c.tokenizer = Tokenizer::bytes();
  } else {
    s = scan_characters(src);
  }
  if (s.bytes == 0) throw std::invalid_argument(fmt::format("{} is empty", source));
  // A NUL is a byte like any other to the byte tokenizer (token 0); to the character tokenizer
  // it says the file is not the text it expects.
  if (s.nul_at && kind == TokenizerKind::chars)
    throw std::invalid_argument(fmt::format("{} looks binary (a NUL byte at offset {}); give a text file, or "
                                            "--tokenizer bytes, which reads any input",
                                            source, *s.nul_at));
  if (s.invalid_utf8)
    throw std::invalid_argument(fmt::format("{} is not UTF-8 text (invalid byte 0x{:02x} at offset {}); "
                                            "--tokenizer bytes reads any text",
                                            source, s.invalid_utf8->second, s.invalid_utf8->first));
  c.fingerprint = s.fingerprint;
  if (kind == TokenizerKind::chars) {
    std::vector<char32_t> chars;
    for (std::size_t cp = 0; cp < s.seen.size(); ++cp)
      if (s.seen[cp]) chars.push_back(static_cast<char32_t>(cp));
    s.seen = {};
    c.tokenizer = Tokenizer::of_characters(std::move(chars));
    c.tokens = encode_characters(src, s, c.tokenizer, source);
  }
  const std::int64_t n = c.tokens.size();
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

// The batch of windows at `starts` of the corpus's token stream.
Batch windows(const TextCorpus& corpus, std::int64_t context, const std::vector<std::int64_t>& starts) {
  return window_batch(starts, context,
                      [&](std::int64_t o, std::int64_t* out) { corpus.tokens.copy_to(o, context + 1, out); });
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
  for (char32_t c = 0; c < 128; ++c)
    if (seen_ascii[c]) others.push_back(c);
  return of_characters(std::move(others));
}

Tokenizer Tokenizer::of_characters(std::vector<char32_t> characters) {
  std::sort(characters.begin(), characters.end());
  characters.erase(std::unique(characters.begin(), characters.end()), characters.end());
  Tokenizer t;
  t.kind_ = TokenizerKind::chars;
  t.chars_ = std::move(characters);
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

std::int64_t Tokenizer::token_of(char32_t cp) const {
  if (kind_ == TokenizerKind::bytes) return cp < 256 ? static_cast<std::int64_t>(cp) : -1;
  if (cp < 128) return ascii_[cp];
  const auto it = std::lower_bound(chars_.begin(), chars_.end(), cp);
  return it != chars_.end() && *it == cp ? it - chars_.begin() : -1;
}

std::vector<std::int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int64_t> out;
  out.reserve(text.size());
  if (kind_ == TokenizerKind::bytes) {
    for (char c : text) out.push_back(static_cast<unsigned char>(c));
    return out;
  }
  for_each_char(text, "the text", [&](char32_t cp) {
    const std::int64_t id = token_of(cp);
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

int TokenSequence::width_for(std::int64_t vocab_size) { return vocab_size <= 256 ? 1 : vocab_size <= 65536 ? 2 : 4; }

TokenSequence::TokenSequence(std::int64_t size, std::int64_t vocab_size)
    : width_(width_for(vocab_size)), size_(size), data_(static_cast<std::size_t>(size) * static_cast<std::size_t>(width_)) {}

TokenSequence TokenSequence::of_bytes(std::vector<std::uint8_t> bytes) {
  TokenSequence t;
  t.size_ = static_cast<std::int64_t>(bytes.size());
  t.data_ = std::move(bytes);
  return t;
}

std::int64_t TokenSequence::operator[](std::int64_t i) const {
  const std::uint8_t* p = data_.data() + i * width_;
  switch (width_) {
  case 1: return p[0];
  case 2: return p[0] | std::int64_t{p[1]} << 8;
  default: return p[0] | std::int64_t{p[1]} << 8 | std::int64_t{p[2]} << 16 | std::int64_t{p[3]} << 24;
  }
}

void TokenSequence::set(std::int64_t i, std::int64_t token) {
  std::uint8_t* p = data_.data() + i * width_;
  for (int k = 0; k < width_; ++k) p[k] = static_cast<std::uint8_t>(token >> (8 * k));
}

void TokenSequence::copy_to(std::int64_t first, std::int64_t count, std::int64_t* out) const {
  if (width_ == 1) {
    std::copy(data_.data() + first, data_.data() + first + count, out);
    return;
  }
  for (std::int64_t k = 0; k < count; ++k) out[k] = (*this)[first + k];
}

std::vector<std::int64_t> TokenSequence::slice(std::int64_t first, std::int64_t count) const {
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  copy_to(first, count, out.data());
  return out;
}

TextCorpus text_corpus_of(std::string text, TokenizerKind kind, std::int64_t context, const std::string& source) {
  return corpus_of(memory_source(text), kind, context, source);
}

TextCorpus load_text_corpus(const std::string& path, TokenizerKind kind, std::int64_t context) {
  if (path.empty()) return corpus_of(files_source(default_corpus_files()), kind, context, kDefaultCorpusDir);
  return corpus_of(files_source({path}), kind, context, "--text " + path);
}

std::vector<std::int64_t> text_batch_offsets(const TextCorpus& corpus, std::int64_t context, std::uint64_t seed,
                                             std::uint64_t index, std::int64_t batch_size) {
  check_context(corpus, context, "make_text_batch");
  if (batch_size < 1)
    throw std::invalid_argument(fmt::format("make_text_batch: batch_size must be at least 1, got {}", batch_size));
  Generator gen(mix_seed(seed, index));
  return window_offsets(gen, 0, corpus.train_tokens, context, batch_size);
}

Batch make_text_batch(const TextCorpus& corpus, std::int64_t context, std::uint64_t seed, std::uint64_t index,
                      std::int64_t batch_size) {
  return windows(corpus, context, text_batch_offsets(corpus, context, seed, index, batch_size));
}

std::vector<std::int64_t> text_eval_offsets(const TextCorpus& corpus, std::int64_t context, std::int64_t count) {
  check_context(corpus, context, "make_text_eval_set");
  if (count < 1) throw std::invalid_argument(fmt::format("make_text_eval_set: count must be at least 1, got {}", count));
  Generator gen(kEvalSeed);
  return window_offsets(gen, corpus.train_tokens, corpus.validation_tokens(), context, count);
}

Batch make_text_eval_set(const TextCorpus& corpus, std::int64_t context, std::int64_t count) {
  return windows(corpus, context, text_eval_offsets(corpus, context, count));
}

TextEvalReader::TextEvalReader(const TextCorpus& corpus, std::int64_t context, std::int64_t count)
    : corpus_(corpus), context_(context), gen_(kEvalSeed), left_(count) {
  check_context(corpus, context, "make_text_eval_set");
  if (count < 1) throw std::invalid_argument(fmt::format("make_text_eval_set: count must be at least 1, got {}", count));
}

Batch TextEvalReader::next(std::int64_t rows) {
  if (rows < 1) throw std::invalid_argument(fmt::format("TextEvalReader::next: rows must be at least 1, got {}", rows));
  if (left_ == 0) return {};
  const std::int64_t n = std::min(rows, left_);
  left_ -= n;
  // the draws text_eval_offsets makes, continued
  return windows(corpus_, context_, window_offsets(gen_, corpus_.train_tokens, corpus_.validation_tokens(), context_, n));
}

} // namespace headgrad::data
