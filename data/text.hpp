// text.hpp - a text corpus for a character-level (or byte-level) causal language model: its
// tokenizer, the train/validation split, and batches of random windows, as nanoGPT's
// shakespeare_char recipe prepares them (data/shakespeare_char/prepare.py: the vocabulary is the
// sorted set of the text's characters, the first 90% trains and the last 10% validates;
// train.py's get_batch: B random windows of T tokens, the targets one token further on).
//
// Batches are pure functions of (corpus, seed, index), drawn with headgrad::Generator exactly as
// the toy tasks' (data/tasks.hpp), so a resumed run sees the batches the uninterrupted one would
// have. The validation windows come from kEvalSeed, and only from the validation split.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tasks.hpp"
#include "framework/core/random.hpp"

namespace headgrad::data {

// chars: one token per Unicode character (code point) of UTF-8 text, the vocabulary being the
// text's own characters; bytes: one token per byte (256 tokens), for any text.
enum class TokenizerKind : std::uint8_t { chars, bytes };
TokenizerKind parse_tokenizer(const std::string& name); // "chars" | "bytes"; else std::invalid_argument
const char* tokenizer_name(TokenizerKind kind);

class Tokenizer {
public:
  Tokenizer() = default; // no vocabulary: size() 0
  // The distinct characters of `text` (valid UTF-8, else std::invalid_argument naming the byte
  // offset), sorted by code point: token i is the i-th of them.
  static Tokenizer chars_of(std::string_view text);
  // The tokenizer of these characters (code points), token i being the i-th smallest.
  static Tokenizer of_characters(std::vector<char32_t> characters);
  static Tokenizer bytes(); // token b is the byte b
  // The tokenizer whose vocabulary() is `vocabulary` (what a checkpoint stores).
  static Tokenizer from_vocabulary(TokenizerKind kind, std::string_view vocabulary);

  TokenizerKind kind() const { return kind_; }
  std::int64_t size() const;
  // chars: the vocabulary's characters in token order, as UTF-8; bytes: "" (nothing to store).
  std::string vocabulary() const;
  // Throws std::invalid_argument naming the first character outside the vocabulary (or, for
  // chars, the first invalid UTF-8 byte).
  std::vector<std::int64_t> encode(std::string_view text) const;
  // The token of one character (chars) or byte value (bytes); -1 if it has none.
  std::int64_t token_of(char32_t code_point) const;
  // The token's text: a character's UTF-8 bytes, or the one byte (which may be part of a
  // character: print byte tokens through Utf8Stream). Throws std::out_of_range outside [0, size).
  std::string decode(std::int64_t token) const;
  std::string decode(const std::vector<std::int64_t>& tokens) const;

private:
  TokenizerKind kind_ = TokenizerKind::chars;
  std::vector<char32_t> chars_;        // chars: token -> code point, ascending
  std::vector<std::int32_t> ascii_;    // chars: ASCII code point -> token (-1: none), the fast path
};

// Bytes in, whole UTF-8 characters out: a byte-level model's output printed as it streams, a
// character only once its last byte came (an invalid sequence comes out as U+FFFD).
class Utf8Stream {
public:
  std::string push(std::string_view bytes); // what can be printed now
  std::string flush();                      // the rest (an unfinished character: U+FFFD)

private:
  std::string pending_;
};

// Where the default corpus lives: Debian's `fortunes` package (about 2.5 MB of English text).
inline constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";

// The tokens of a corpus, each in the narrowest unsigned integer type that holds every token of
// its vocabulary: one byte for up to 256 tokens (the byte tokenizer, and the characters of most
// texts), two for up to 65536, four beyond. A 200 MB text of one-byte tokens takes 200 MB.
class TokenSequence {
public:
  TokenSequence() = default;
  TokenSequence(std::int64_t size, std::int64_t vocab_size); // every token 0
  static int width_for(std::int64_t vocab_size);              // bytes per token: 1, 2 or 4
  std::int64_t size() const { return size_; }
  int width() const { return width_; }
  std::uint64_t bytes() const { return data_.size(); }
  std::int64_t operator[](std::int64_t i) const;
  void set(std::int64_t i, std::int64_t token);
  // out[k] = token first + k for k < count, widened to int64 (a batch row).
  void copy_to(std::int64_t first, std::int64_t count, std::int64_t* out) const;
  std::vector<std::int64_t> slice(std::int64_t first, std::int64_t count) const;
  // One-byte tokens whose bytes are `bytes` (the byte tokenizer: the tokens are the text).
  static TokenSequence of_bytes(std::vector<std::uint8_t> bytes);

private:
  int width_ = 1;
  std::int64_t size_ = 0;
  std::vector<std::uint8_t> data_; // little-endian tokens of width_ bytes
};

struct TextCorpus {
  std::string source;           // the file read, or kDefaultCorpusDir
  Tokenizer tokenizer;
  TokenSequence tokens;             // the whole text
  std::int64_t train_tokens = 0;    // tokens [0, train_tokens) train, the rest (the last 10%) validates
  std::uint64_t fingerprint = 0;    // FNV-1a 64 of the text's bytes: a resumed run checks it is the same text
  std::int64_t validation_tokens() const { return tokens.size() - train_tokens; }
};

// Reads `path` ("" = the default corpus: the text files of kDefaultCorpusDir, in name order) and
// tokenizes it. Refuses, with std::invalid_argument and one line naming the file: a file that
// cannot be read or is not a regular file (a FIFO, a device), an empty one, a binary one (a NUL
// byte; for chars also invalid UTF-8), and one too short for windows of `context` tokens in both
// splits.
//
// Memory: the tokens (TokenSequence) and one 1 MB buffer; the text itself is never held whole.
// The file is read in 1 MB pieces: with --tokenizer bytes once, straight into the tokens; with
// chars twice, first to learn the vocabulary (and check the text), then to encode it - the second
// time from the page cache. A file that changes between the two is refused.
TextCorpus load_text_corpus(const std::string& path, TokenizerKind kind, std::int64_t context);
// The same from text in memory (tests); `source` names it in messages.
TextCorpus text_corpus_of(std::string text, TokenizerKind kind, std::int64_t context, const std::string& source);

// FNV-1a 64 over `bytes` (Fowler, Noll, Vo): the corpus fingerprint.
std::uint64_t fnv1a64(std::string_view bytes);

// Training batch `index` of the run seeded `seed`: batch_size windows of `context` tokens at
// uniform offsets in the training split (tokens (B, T)), targets the next token of each position
// (B, T), valid_lens all T. Drawn from Generator(mix_seed(seed, index)) only.
Batch make_text_batch(const TextCorpus& corpus, std::int64_t context, std::uint64_t seed, std::uint64_t index,
                      std::int64_t batch_size);
// The window offsets of that batch (what the PyTorch reference is given): B offsets into tokens.
std::vector<std::int64_t> text_batch_offsets(const TextCorpus& corpus, std::int64_t context, std::uint64_t seed,
                                             std::uint64_t index, std::int64_t batch_size);
// The validation set: `count` windows from the validation split, drawn in order from
// Generator(kEvalSeed) (a prefix of a bigger set is the smaller set).
Batch make_text_eval_set(const TextCorpus& corpus, std::int64_t context, std::int64_t count);
// The same set a chunk at a time (as EvalSetReader, data/tasks.hpp): next(n) gives the following
// min(n, windows left) windows, undefined tensors once all `count` were given. Holds `corpus`.
class TextEvalReader {
public:
  TextEvalReader(const TextCorpus& corpus, std::int64_t context, std::int64_t count); // validates as make_text_eval_set
  Batch next(std::int64_t rows);

private:
  const TextCorpus& corpus_;
  std::int64_t context_;
  Generator gen_;
  std::int64_t left_;
};
std::vector<std::int64_t> text_eval_offsets(const TextCorpus& corpus, std::int64_t context, std::int64_t count);

} // namespace headgrad::data
