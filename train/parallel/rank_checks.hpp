// rank_checks.hpp - what the ranks of a training run under MPI check among themselves: that they
// run the same settings, read the same data, start from the same parameters and optimizer state,
// and never drift apart. Collectives: every rank calls each one at the same point; a failure throws
// distributed::CollectiveError on every rank alike (rank 0 reports it).
#pragma once
#include <cstdint>

#include "framework/optim/optimizer.hpp"
#include "models/token_model.hpp"
#include "train/run/task_data.hpp"
#include "train/run/train_options.hpp"

namespace headgrad::train {

// Every setting that shapes the run (the run config's fields, evaluation and checkpoint cadence,
// --resume, --overwrite, --reshard, --rank-timeout): "ranks disagree on --lr: rank 1 has 0.01,
// rank 0 has 0.003". The threads and what is printed may differ; --out matters on rank 0 only.
void check_same_settings(const TrainOptions& options);

// The same corpus contents on every rank (a text run: the corpus fingerprints): a file of
// the same name whose contents differ between machines would give the same vocabulary - and so
// the same model and parameters - but other batches. "the ranks read different texts: rank 1's
// --text corpus.txt has fingerprint ..., rank 0's ...; every rank must read the same contents".
void check_same_data(const TaskData& data);

// The same parameter list, values and optimizer state on every rank (the same seeded
// initialisation, or the same checkpoint): "the ranks start from different parameters: ...".
void check_same_start(const nn::Module& model, const optim::Optimizer& optimizer);

// Bitwise the same parameters on every rank (a checksum per tensor): "step 500: parameter
// 'dense.weight' differs between rank 0 and rank 1; the ranks drifted apart, training stopped".
void check_no_drift(const nn::Module& model, std::int64_t step);

} // namespace headgrad::train
