// trainer.hpp - the training loop behind `headgrad train`: batches, the training step, progress,
// evaluation, metrics.csv and its curves, checkpoints and the attention picture.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/distributed/bucketed_allreduce.hpp"
#include "train/run/checkpoint.hpp"
#include "train/loop/evaluate.hpp"
#include "train/run/run_config.hpp"
#include "train/run/train_options.hpp"
#include "train/loop/train_step.hpp"

namespace headgrad::train {

struct TrainSummary {
  std::int64_t steps = 0;          // optimizer steps done in total (including resumed ones)
  double loss = 0;                 // mean training loss over the last (up to) 50 steps
  EvalResult eval;                 // the last evaluation this invocation completed, if `evaluated`
  bool evaluated = false;          // false: none (e.g. a stop signal came first): `eval` means nothing
  std::int64_t eval_step = 0;      // the step `eval` was measured at
  double tokens_per_s = 0;         // (batch * max_len) positions per second of training time
  double seconds = 0;              // wall time of this invocation's loop
  double train_seconds = 0;        // the part of it spent in training steps
  bool interrupted = false;        // stopped by a signal (a checkpoint was saved, unless before step 1)
  int stop_signal = 0;             // which: SIGINT, SIGTERM or SIGHUP (request_stop(): SIGINT)
  std::vector<double> losses;      // every step's loss in this invocation (tests)
  std::string checkpoint;          // path of the last saved model file
  int ranks = 1;                   // MPI ranks that trained (distributed::size())
  std::int64_t shards = 1;         // S, the shards of every batch (run.shards as the run resolved it)
  distributed::CommStats comm;     // this rank's gradient all-reduce (ranks > 1)
  bool reference = false;          // trained in reference mode (runtime::reference())
};

// Trains a fresh model, or continues the checkpoint options.resume (loaded here). A non-finite
// loss or gradient throws NonFiniteError (train_step's message, naming the intact checkpoint).
// options.out_dir is locked for the run and refused when it holds another run's checkpoint
// (train/run/run_directory.hpp).
//
// Every batch is cut into options.run.shards shards (0: ranks x threads, at most --batch), whose
// gradients add up in the shard tree: the run's bits depend on that count, not on how many ranks
// and threads share the shards; the checkpoint keeps it, and a resumed run must keep it unless
// options.reshard. One thread of one rank on one shard trains with the textbook step
// (train/loop/train_step.hpp), every other layout with the parallel step
// (train/parallel/parallel_step.hpp): the same bits over one shard. As one rank of several (framework/distributed/communicator.hpp) every rank
// calls train() with the same options: each trains on its node of the shard tree (parallel_step),
// and rank 0 alone evaluates, writes the output directory and prints. A collective that waits
// options.rank_timeout for a silent rank throws distributed::RankTimeout. The ranks check that they share settings and
// start from the same parameters, compare parameter checksums at every evaluation and at the end,
// and stop together (after a Ctrl-C on any of them, or when rank 0 reaches stop_at_seq_acc). Errors every rank sees alike
// are distributed::CollectiveError (or NonFiniteError).
//
// In reference mode (runtime::set_reference, framework/engine/kernels.hpp) the run is the textbook
// step on one thread over the whole batch with d2l's composed attention: options asking for more
// threads, shards or ranks, or the fused attention, are refused (std::invalid_argument).
TrainSummary train(const TrainOptions& options);
// Continues `resumed`, the checkpoint options.resume already loaded (so it is read once).
// options.run must keep every field that must match on resume (train::Role): the model is the
// checkpoint's and its batches continue; std::invalid_argument names the fields that differ.
TrainSummary train(const TrainOptions& options, LoadedRun resumed);

// --precision bf16 (RunConfig::precision) is refused, with one line (std::invalid_argument), in
// reference mode and on a CPU without bf16 instructions (framework/engine/blas/bf16_cpu.hpp). train()
// checks it first; the command line checks it before its banner.
void check_precision(const RunConfig& run);
// "" unless the run is bf16 on a CPU where bf16 gemms run below float32's speed: then one line saying so.
std::string precision_note(const RunConfig& run);

// SIGINT, SIGTERM and SIGHUP (a closed terminal; treated as SIGTERM) set a flag the loop checks
// between steps and an evaluation between its chunks (one is cut short: not logged); the run saves
// the checkpoint of its last finished step and returns, with TrainSummary::stop_signal saying
// which signal (`headgrad train` then exits 128 + its number: 130, 143, 129, as shells expect).
// A signal that comes during start-up (before the first step: reading the corpus, building the
// model) is kept, and the run stops before its first step, saving nothing. A second signal ends
// the process as the signal's default action: at once, unless the first one's checkpoint is still
// to be written - then right after that save (every checkpoint on disk stays complete, and none
// the first signal would have saved is lost).
// (mpirun turns a Ctrl-C into SIGTERM for every rank, and SIGKILL a second later.) Install it
// first thing, before the run starts up.
void install_interrupt_handler();
void request_stop(); // what the handler does, as for SIGINT; also for tests

} // namespace headgrad::train
