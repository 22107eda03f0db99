// task_data.hpp - the batches and the held-out set of a run: the toy task's generated sequences,
// or windows of the text corpus (data/text.hpp), which a text model's checkpoint names and
// fingerprints so that a resumed run and `headgrad sample` know their text and vocabulary.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "data/text.hpp"
#include "data/token_files.hpp"
#include "train/run/held_out.hpp"
#include "train/run/run_config.hpp"

namespace headgrad::train {

class TaskData {
public:
  // Task text: reads the corpus (cfg.text, cfg.tokenizer; std::invalid_argument with one line
  // when it cannot). Toy tasks: nothing to read.
  explicit TaskData(const RunConfig& cfg);
  // Training batch `index` (0-based: step s trains on batch s - 1) of batch_size rows.
  data::Batch batch(std::uint64_t index, std::int64_t batch_size) const;
  data::Batch eval_set(std::int64_t count) const;
  // The same set read a chunk at a time (evaluate() over it holds one chunk, whatever count), and
  // its row `index` alone (drawn in chunks up to it).
  EvalRows eval_rows(std::int64_t count) const;
  data::Batch eval_example(std::int64_t index) const;
  const data::TextCorpus* corpus() const { return corpus_.get(); } // null for a toy task and token files
  const data::TokenFiles* token_files() const { return tokens_.get(); } // task tokens only
  std::int64_t vocab_size() const; // the text's tokenizer's, the token files', or the toy task's --vocab

  // The checkpoint metadata of a text run: "text_vocabulary" (the tokenizer's) and
  // "text_fingerprint" (the corpus's, hex); empty for a toy task.
  std::map<std::string, std::string> checkpoint_metadata() const;
  // Throws std::invalid_argument naming `source` when the checkpoint metadata `meta` belongs to
  // another text (a resumed run must continue on the text it started on).
  void check_same_text(const std::map<std::string, std::string>& meta, const std::string& source) const;

private:
  RunConfig cfg_;
  std::shared_ptr<const data::TextCorpus> corpus_;
  std::shared_ptr<const data::TokenFiles> tokens_;
};

// The tokenizer a text checkpoint was trained with (its metadata: the config's tokenizer and
// "text_vocabulary"); std::invalid_argument naming `source` if it has none.
data::Tokenizer checkpoint_tokenizer(const RunConfig& cfg, const std::map<std::string, std::string>& meta,
                                     const std::string& source);

} // namespace headgrad::train
