#include "train/parallel/rank_checks.hpp"

#include <fmt/format.h>

#include "framework/distributed/consistency.hpp"

namespace headgrad::train {

using distributed::CollectiveError;
using distributed::first_difference;

void check_same_settings(const TrainOptions& o) {
  std::vector<std::pair<std::string, std::string>> settings;
  // (not --text: ranks on other machines may read the same contents by other paths; the texts are
  // compared by fingerprint, check_same_data)
  visit_run_fields([&](const FieldInfo& f, auto member) {
    if (f.flag != std::string("text")) settings.emplace_back(std::string("--") + f.flag, to_text(o.run.*member));
  });
  visit_train_options([&](const OptionInfo& f, auto member) {
    if (f.same_on_every_rank) settings.emplace_back(option_name(f), option_text(o.*member));
  });
  if (const auto d = first_difference(settings))
    throw CollectiveError(fmt::format("ranks disagree on {}: rank {} has {}, rank 0 has {}", d->name, d->rank, d->value,
                                      d->root_value));
}

void check_same_data(const TaskData& data) {
  const data::TextCorpus* corpus = data.corpus();
  std::vector<std::pair<std::string, std::string>> mine; // (a toy task has nothing to read)
  if (corpus) mine.emplace_back("fingerprint", fmt::format("{:016x}", corpus->fingerprint));
  if (const auto d = first_difference(mine))
    // (rank 0, which prints it, names its own text: the other rank's path may differ)
    throw CollectiveError(fmt::format("the ranks read different texts: rank {}'s text has fingerprint {}, rank 0's "
                                      "({}) {}; every rank must read the same contents",
                                      d->rank, d->value, corpus ? corpus->source : "text", d->root_value));
}

void check_same_start(const nn::Module& model, const optim::Optimizer& optimizer) {
  const NamedTensors params = model.named_parameters();
  auto d = first_difference(distributed::descriptions(params));
  if (d)
    throw CollectiveError(fmt::format("the ranks build different models: {} is {} on rank {} but {} on rank 0",
                                      d->name, d->value, d->rank, d->root_value));
  auto values = distributed::checksums(params);
  for (auto& entry : distributed::checksums(optimizer.state())) values.push_back(std::move(entry));
  if ((d = first_difference(values)))
    throw CollectiveError(fmt::format("the ranks start from different parameters: '{}' differs between rank 0 and rank "
                                      "{}; a checkpoint must be the same file on every rank",
                                      d->name, d->rank));
}

void check_no_drift(const nn::Module& model, std::int64_t step) {
  if (const auto d = first_difference(distributed::checksums(model.named_parameters())))
    throw CollectiveError(fmt::format("step {}: parameter '{}' differs between rank 0 and rank {}; the ranks drifted "
                                      "apart, training stopped",
                                      step, d->name, d->rank));
}

} // namespace headgrad::train
