#include "train/run/task_data.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::train {

TaskData::TaskData(const RunConfig& cfg) : cfg_(cfg) {
  if (cfg.task == data::Task::tokens) tokens_ = std::make_shared<const data::TokenFiles>(cfg.data, cfg.context, cfg.seed);
  else if (cfg.is_text())
    corpus_ = std::make_shared<const data::TextCorpus>(
        data::load_text_corpus(cfg.text, data::parse_tokenizer(cfg.tokenizer), cfg.context));
}

std::int64_t TaskData::vocab_size() const {
  return corpus_ ? corpus_->tokenizer.size() : tokens_ ? tokens_->vocab_size() : cfg_.vocab;
}

data::Batch TaskData::batch(std::uint64_t index, std::int64_t batch_size) const {
  if (tokens_) return tokens_->batch(index, batch_size);
  if (corpus_) return data::make_text_batch(*corpus_, cfg_.context, cfg_.seed, index, batch_size);
  return data::make_batch(cfg_.task_config(), cfg_.seed, index, batch_size);
}

data::Batch TaskData::eval_set(std::int64_t count) const {
  if (tokens_) return tokens_->eval_set(count);
  if (corpus_) return data::make_text_eval_set(*corpus_, cfg_.context, count);
  return data::make_eval_set(cfg_.task_config(), count);
}

EvalRows TaskData::eval_rows(std::int64_t count) const {
  if (tokens_) return [reader = tokens_->eval_reader(count), files = tokens_](std::int64_t rows) { return reader(rows); };
  if (corpus_) {
    auto reader = std::make_shared<data::TextEvalReader>(*corpus_, cfg_.context, count);
    return [reader, corpus = corpus_](std::int64_t rows) { return reader->next(rows); }; // the corpus stays alive
  }
  auto reader = std::make_shared<data::EvalSetReader>(cfg_.task_config(), count);
  return [reader](std::int64_t rows) { return reader->next(rows); };
}

data::Batch TaskData::eval_example(std::int64_t index) const {
  if (index < 0) throw std::invalid_argument(fmt::format("eval_example: index {} is negative", index));
  const EvalRows rows = eval_rows(index + 1);
  const std::int64_t chunk = std::max<std::int64_t>(1, kEvalChunkTokens / cfg_.sequence_length());
  data::Batch last;
  for (data::Batch b = rows(chunk); b.tokens.defined(); b = rows(chunk)) last = std::move(b);
  return data::slice_batch(last, last.tokens.shape()[0] - 1, 1);
}

std::map<std::string, std::string> TaskData::checkpoint_metadata() const {
  if (!corpus_) return {};
  return {{"text_vocabulary", corpus_->tokenizer.vocabulary()},
          {"text_fingerprint", fmt::format("{:016x}", corpus_->fingerprint)}};
}

void TaskData::check_same_text(const std::map<std::string, std::string>& meta, const std::string& source) const {
  if (!corpus_) return;
  const auto it = meta.find("text_fingerprint");
  const std::string mine = fmt::format("{:016x}", corpus_->fingerprint);
  if (it == meta.end() || it->second != mine)
    throw std::invalid_argument(fmt::format("{}: the checkpoint was trained on another text than {} (fingerprint {}, "
                                            "this text's {})",
                                            source, corpus_->source, it == meta.end() ? "none" : it->second, mine));
  const auto v = meta.find("text_vocabulary");
  if (v == meta.end() || v->second != corpus_->tokenizer.vocabulary())
    throw std::invalid_argument(fmt::format("{}: the checkpoint's vocabulary differs from {}'s", source, corpus_->source));
}

data::Tokenizer checkpoint_tokenizer(const RunConfig& cfg, const std::map<std::string, std::string>& meta,
                                     const std::string& source) {
  if (!cfg.is_text() || cfg.task == data::Task::tokens)
    throw std::invalid_argument(fmt::format("{}: a checkpoint of task {}, not a text model (train one with --task text)",
                                            source, data::task_name(cfg.task)));
  const auto it = meta.find("text_vocabulary");
  if (it == meta.end()) throw std::invalid_argument(fmt::format("{}: checkpoint metadata lacks 'text_vocabulary'", source));
  data::Tokenizer t;
  try {
    t = data::Tokenizer::from_vocabulary(data::parse_tokenizer(cfg.tokenizer), it->second);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: checkpoint vocabulary: {}", source, e.what()));
  }
  if (t.size() != cfg.vocab)
    throw std::invalid_argument(fmt::format("{}: the checkpoint's vocabulary has {} tokens but its model {}", source,
                                            t.size(), cfg.vocab));
  return t;
}

} // namespace headgrad::train
