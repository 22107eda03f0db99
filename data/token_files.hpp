// token_files.hpp - a data source, and batches from token files prepared elsewhere: nanoGPT's
// train.bin / val.bin (its data/*/prepare.py writes the token ids of each split as uint16,
// little-endian, np.array(ids, dtype=np.uint16).tofile(path)), so a GPT trains on text that a BPE
// tokenizer (tiktoken's GPT-2 encoding, say) prepared. The files are memory-mapped: a batch reads
// the pages of its windows only, so a run's memory does not grow with the files (the kernel keeps
// the pages read in its page cache, and reclaims them as it needs).
#pragma once
#include <concepts>
#include <cstdint>
#include <functional>
#include <string>

#include "data/tasks.hpp"

namespace headgrad::data {

// What a trainer reads: training batch `index` (a pure function of the index, so that a resumed
// run sees the batches the uninterrupted one would have), the held-out set, the vocabulary size
// and the sequence length T. A Batch holds token ids (B, T), targets (B, T) and valid lengths (B)
// (data/tasks.hpp).
template <typename S>
concept DataSource = requires(const S& s, std::uint64_t index, std::int64_t rows) {
  { s.batch(index, rows) } -> std::same_as<Batch>;
  { s.eval_set(rows) } -> std::same_as<Batch>;
  { s.vocab_size() } -> std::convertible_to<std::int64_t>;
  { s.sequence_length() } -> std::convertible_to<std::int64_t>;
};

// DIR/train.bin and DIR/val.bin as a DataSource: windows of `context` tokens at uniform offsets,
// the targets one token further on, every valid length T (as nanoGPT's get_batch, and as
// make_text_batch draws them: training batch `index` from Generator(mix_seed(seed, index)), the
// held-out windows from Generator(kEvalSeed), only from val.bin).
class TokenFiles {
public:
  // vocab_size 0: read from DIR/meta.json, {"vocab_size": N} (nanoGPT writes meta.pkl, a Python
  // pickle; the JSON is its one number, written beside the files). Refused with
  // std::invalid_argument, one line naming the file: a file missing or not a regular file, empty,
  // of an odd size, or shorter than context + 1 tokens; a meta.json without vocab_size; a vocab_size
  // outside [2, 65536]. A token id >= vocab_size is refused by the batch that reads it (naming the
  // file and the position): checking every token up front would read the whole files.
  TokenFiles(const std::string& dir, std::int64_t context, std::uint64_t seed, std::int64_t vocab_size = 0);
  ~TokenFiles();
  TokenFiles(const TokenFiles&) = delete;
  TokenFiles& operator=(const TokenFiles&) = delete;

  Batch batch(std::uint64_t index, std::int64_t batch_size) const;
  Batch eval_set(std::int64_t count) const;
  // The same held-out set a chunk at a time: each call gives the following min(rows, left) of the
  // `count` windows, undefined tensors once all were given (a prefix of a bigger set is the smaller
  // set). Holds this source.
  std::function<Batch(std::int64_t rows)> eval_reader(std::int64_t count) const;
  std::int64_t vocab_size() const { return vocab_; }
  std::int64_t sequence_length() const { return context_; }
  std::int64_t train_tokens() const { return train_.tokens; }
  std::int64_t val_tokens() const { return val_.tokens; }
  const std::string& dir() const { return dir_; }

private:
  struct Mapped { // one memory-mapped file of uint16 tokens
    std::string path;
    const std::uint16_t* data = nullptr;
    std::int64_t tokens = 0;
  };
  Mapped map(const std::string& name) const;
  Batch windows(const Mapped& file, const std::vector<std::int64_t>& starts) const;

  std::string dir_;
  std::int64_t context_, vocab_;
  std::uint64_t seed_;
  Mapped train_, val_;
};

} // namespace headgrad::data
