#include "train/loop/trainer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <fmt/format.h>

#include "framework/engine/alloc/caching_allocator.hpp"
#include "framework/core/autograd.hpp"
#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/distributed/shard_tree.hpp"
#include "framework/engine/autocast.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/profiler.hpp"
#include "framework/core/random.hpp"
#include "framework/engine/runtime/clock.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "framework/io/restore.hpp"
#include "train/pictures/attention_svg.hpp"
#include "train/parallel/dropout_state.hpp"
#include "train/parallel/parallel_step.hpp"
#include "train/pictures/curves_svg.hpp"
#include "train/run/memory_estimate.hpp"
#include "train/run/metrics_csv.hpp"
#include "train/loop/progress.hpp"
#include "train/loop/stop_signal.hpp"
#include "train/parallel/rank_checks.hpp"
#include "train/parallel/rank_shard.hpp"
#include "train/run/run_directory.hpp"
#include "train/run/run_model.hpp"
#include "train/run/run_optimizer.hpp"
#include "train/run/task_data.hpp"

namespace headgrad::train {
namespace {

namespace fs = std::filesystem;

// The signal that asked the run to stop (0: none), set by the handler and by request_stop() from
// any thread: a lock-free atomic is safe in both places (a volatile sig_atomic_t written from
// another thread would be a data race). It stays set until a run has stopped for it, so a signal
// that comes while the run is still starting up (reading its corpus, building its model) is not
// lost.
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);
// Whether steps have finished since the last save, and a second signal held until they are saved:
// 0 none (nothing trained yet in this process, or all of it saved), -1 unsaved steps, a signal
// number: unsaved steps and a second signal that ends the process once they are saved. One atomic,
// so that the handler and the end of a save cannot both miss the held signal.
std::atomic<int> g_unsaved{0};

extern "C" void on_stop_signal(int sig) {
  if (g_stop.exchange(sig, std::memory_order_relaxed) != 0) {
    // A second signal: the user (or a scheduler's TERM then TERM) does not want to wait. Unless
    // the first signal's checkpoint is still to be written - then it is held until that save
    // completes (end_of_save) - end as the signal's default action would (every checkpoint on
    // disk is complete: they are written atomically). signal() and raise() are async-signal-safe.
    int unsaved = -1;
    if (g_unsaved.compare_exchange_strong(unsaved, sig) || unsaved > 0) return; // held
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

// A step finished: its work is not on disk yet (a held signal stays held).
void step_unsaved() {
  int none = 0;
  g_unsaved.compare_exchange_strong(none, -1);
}

// A save completed: a second signal held for it now ends the process, as it would have at once.
void end_of_save() {
  if (const int held = g_unsaved.exchange(0); held > 0) {
    std::signal(held, SIG_DFL);
    std::raise(held);
  }
}


// A resumed run rebuilds the checkpoint's model and continues its batches: every field that must
// match on resume has to, or batches, metadata and model would silently disagree.
void check_resumable(const RunConfig& run, RunConfig checkpoint, const std::string& path, bool reshard) {
  if (checkpoint.shards == 0) checkpoint.shards = run.shards; // saved before runs kept their shard count
  std::string differ;
  for (const ResumeConflict& c : resume_conflicts(run, checkpoint, reshard))
    differ += fmt::format("{}{} {} (checkpoint: {})", differ.empty() ? "" : ", ", c.field.flag, c.run_value,
                          c.checkpoint_value);
  if (!differ.empty())
    throw std::invalid_argument(fmt::format("{}: the run differs from the checkpoint in what a resumed run keeps: {}",
                                            path, differ));
}

// What a run trains: a fresh model, or the checkpoint's with its optimizer state.
struct Trainee {
  std::unique_ptr<models::TokenModel> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::int64_t shards = 1;                 // S, the shards of every batch
  bool textbook = false;                   // one thread of one rank trains on the whole batch
  std::unique_ptr<ThreadReplicas> workers; // threads > 1: the rank's shards spread over threads
  std::unique_ptr<ShardDropout> dropout;   // the dropout generators of the rank's shards
  std::unique_ptr<distributed::BucketedAllreduce> across_ranks; // several ranks: the gradient sums
  std::int64_t start = 0;                  // steps done before this invocation
  runtime::MatmulPrecision precision = runtime::MatmulPrecision::f32; // run.precision

  // One step on `batch`: the textbook step when one thread trains on the whole batch, else the
  // parallel step over the shards (train/parallel/parallel_step.hpp). (One shard on several
  // threads is the parallel step's too: it runs a shard's ops on one thread, so that the bits
  // depend on the shard count alone - an op split over several threads may add in another order.)
  StepResult step(const data::Batch& batch, const StepSettings& settings) {
    // bf16: the step's linear gemms on bf16 copies of the weights made here (autocast.hpp); the
    // update at the step's end changes the weights after their last gemm, and the guard closes then
    const runtime::Autocast autocast(model->named_parameters(), precision);
    if (!textbook)
      return parallel_step(*model, *optimizer, batch, settings, {shards, workers.get(), across_ranks.get(), dropout.get()});
    dropout->load(*model, 0); // the masks of shard 0, which a checkpoint keeps
    const StepResult r = train_step(*model, *optimizer, batch, settings);
    dropout->store(*model, 0);
    return r;
  }
};

Trainee trainee_for(const TrainOptions& o, LoadedRun* resumed, const TaskData& data) {
  Trainee t;
  t.shards = o.run.shards;
  t.precision = o.run.precision == "bf16" ? runtime::MatmulPrecision::bf16 : runtime::MatmulPrecision::f32;
  t.textbook = o.run.shards == 1 && o.threads == 1 && distributed::size() == 1;
  if (resumed) {
    data.check_same_text(resumed->metadata, o.resume); // first: another text also changes the vocab
    check_resumable(o.run, resumed->config, o.resume, o.reshard);
    // the checkpoint's parameters in a model of this run's config: the stored fields are the
    // checkpoint's (checked above), the compute ones (the attention path) this run's own
    t.model = make_model(o.run, o.run.seed);
    io::restore_parameters(*t.model, resumed->model->named_parameters(), o.resume);
    resumed->model.reset();
    t.start = resumed->step;
  } else {
    t.model = make_model(o.run, o.run.seed);
  }
  const distributed::ShardRange mine = distributed::rank_shards(o.run.shards, distributed::size(), distributed::rank());
  t.dropout = std::make_unique<ShardDropout>(*t.model, o.run.seed, o.run.shards, mine); // (before any step)
  t.optimizer = make_optimizer(o.run, t.model->named_parameters());
  // the masks continue where the checkpoint's run left them (every shard)
  if (resumed) {
    t.dropout->restore(load_optimizer_state(o.resume, t.start, *t.optimizer, &resumed->metadata),
                       optimizer_path_for(o.resume));
    // A run's optimizer steps once per training step: a state whose own count is another (a
    // damaged file, or one from another run) would continue with Adam's bias corrections of
    // another step.
    if (t.optimizer->steps() != t.start)
      throw std::invalid_argument(fmt::format("{}: optimizer state 'step' is {} but the checkpoint is from step {} (the "
                                              "file is damaged or belongs to another run)",
                                              optimizer_path_for(o.resume), t.optimizer->steps(), t.start));
  }
  // one worker per thread, at most one per shard of this rank
  t.workers = workers_for(*t.model, static_cast<int>(std::min<std::int64_t>(o.threads, mine.count())), o.run.seed);
  return t;
}

// What a step stops: nothing, the run (the accuracy goal was reached), or the run after a save
// (a stop signal, which one: its number). Every rank stops after the same step, for its own
// reason or any other rank's (a signal before the goal, the larger signal number if several).
struct Stop {
  bool goal = false;
  int signal = 0;
  bool any() const { return goal || signal != 0; }
};
Stop agreed_stop(Stop mine) {
  if (distributed::size() == 1) return mine;
  const std::int64_t v = distributed::allreduce_max(mine.signal ? 100 + mine.signal : mine.goal ? 1 : 0);
  return v >= 100 ? Stop{false, static_cast<int>(v - 100)} : Stop{v == 1, 0};
}
Stop stop_now(bool goal) { return {goal, g_stop.load(std::memory_order_relaxed)}; }

// One invocation: steps start+1 .. run.steps, with evaluations, checkpoints, metrics.csv and
// progress, then the final evaluation, checkpoint and attention picture.
class TrainingLoop {
public:
  // `continues_log`: out_dir holds the checkpoint this run resumes, and so its metrics.csv.
  TrainingLoop(const TrainOptions& o, Trainee trainee, const TaskData& data, bool continues_log)
      : o_(o), cfg_(o.run), data_(data), t_(std::move(trainee)), schedule_(lr_schedule(o.run)),
        model_path_((fs::path(o.out_dir) / "model.safetensors").string()),
        progress_(o.quiet || !root_, o.json, t_.start, o.run.steps, tokens_per_step(), o.run.is_text()),
        continues_log_(continues_log) {
    sum_.steps = t_.start;
    sum_.ranks = distributed::size();
    sum_.shards = o.run.shards;
    sum_.reference = runtime::reference();
  }

  TrainSummary run() {
    if (o_.profile) {
      profiler_reset();
      profiler_enable(true);
    }
    const double t_begin = runtime::seconds_now();
    // A signal during start-up stops the run before its first step: nothing new to save.
    if (const Stop early = agreed_stop(stop_now(false)); early.signal) {
      g_stop.store(0, std::memory_order_relaxed); // handled
      sum_.interrupted = true;
      sum_.stop_signal = early.signal;
      progress_.interrupted_at_start(t_.start);
      summarize(runtime::seconds_now() - t_begin);
      return sum_;
    }
    if (root_) csv_.emplace(o_.out_dir, continues_log_ ? std::optional<std::int64_t>(t_.start) : std::nullopt);
    for (std::int64_t s = t_.start + 1; s <= cfg_.steps; ++s)
      if (!step(s)) break;
    progress_.done();
    if (o_.profile) profiler_enable(false);
    if (t_.across_ranks) check_no_drift(*t_.model, sum_.steps);
    if (!sum_.interrupted) final_evaluation_and_save();
    if (root_ && !cfg_.is_text()) // the toy tasks' picture: a sequence whose tokens read as numbers
      write_attention_svg(*t_.model, data_.eval_example(0), cfg_.task, sum_.steps,
                          (fs::path(o_.out_dir) / "attention.svg").string());
    summarize(runtime::seconds_now() - t_begin);
    return sum_;
  }

private:
  std::int64_t tokens_per_step() const { return cfg_.batch * cfg_.sequence_length(); } // padded positions

  // Step s and what follows it (log, progress, evaluation, save); false: stop the run here.
  bool step(std::int64_t s) {
    step_unsaved(); // from its start: a first signal now saves this step, a second one waits for that
    const double t0 = runtime::seconds_now();
    const data::Batch batch = data_.batch(static_cast<std::uint64_t>(s - 1), cfg_.batch);
    const double lr = schedule_.at(s);
    StepResult r;
    try {
      r = t_.step(batch, {s, lr, cfg_.clip});
    } catch (const NonFiniteError& e) {
      throw NonFiniteError(fmt::format("{}, the last checkpoint {} is intact", e.what(), last_checkpoint()));
    }
    allocator_end_step(); // what this step did not reuse stops holding memory
    const double dt = runtime::seconds_now() - t0;
    train_seconds_ += dt;
    sum_.steps = s;
    sum_.losses.push_back(r.loss);
    if (csv_) csv_->step_row(s, r.loss, lr, static_cast<double>(tokens_per_step()) / dt);
    progress_.step(s, r.loss, lr, train_seconds_);

    const bool eval_now = o_.eval_every > 0 && s % o_.eval_every == 0;
    if (eval_now && t_.across_ranks) check_no_drift(*t_.model, s);
    // (an evaluation a stop signal cut short is no result: it neither logs nor reaches the goal)
    const bool evaluated = eval_now && evaluate_at(s);
    if ((o_.save_every > 0 && s % o_.save_every == 0) || (o_.save_every == 0 && eval_now)) save(s);
    const bool goal = evaluated && sum_.eval.seq_acc >= o_.stop_at_seq_acc;
    const Stop stop = agreed_stop(stop_now(goal));
    if (stop.signal) {
      if (last_saved_ != s) save(s);
      g_stop.store(0, std::memory_order_relaxed); // handled
      sum_.interrupted = true;
      sum_.stop_signal = stop.signal;
      progress_.interrupted(s, model_path_);
    }
    return !stop.any();
  }

  // Rank 0 evaluates and writes; the other ranks go on to the next step and wait for it there.
  // Between chunks rank 0 checks for a stop signal (the evaluation then ends at once: false, and
  // nothing is logged; the run saves and stops) and tells the waiting ranks it is working
  // (distributed::heartbeat: they do not take it for a stopped rank).
  bool evaluate_at(std::int64_t s) {
    last_eval_step_ = s; // on every rank: the final save (a collective) follows from it alike
    if (!root_) return true;
    const EvalRows rows = data_.eval_rows(o_.eval_count);
    bool stopped = false;
    const EvalResult e = evaluate(
        *t_.model,
        [&](std::int64_t n) {
          distributed::heartbeat();
          if (g_stop.load(std::memory_order_relaxed) != 0) stopped = true;
          return stopped ? data::Batch{} : rows(n);
        },
        cfg_.sequence_length()); // streamed
    if (stopped) return false;
    sum_.eval = e;
    sum_.evaluated = true;
    sum_.eval_step = s;
    progress_.eval(s, sum_.eval);
    csv_->eval_row(s, sum_.eval);
    draw_curves();
    return true;
  }

  // The picture is a view of metrics.csv: if it cannot be drawn, training goes on (said once).
  void draw_curves() {
    try {
      write_run_curves(o_.out_dir, csv_->curves().log());
    } catch (const std::exception& e) {
      if (!curves_warned_) fmt::print(stderr, "headgrad train: curves.svg not drawn: {}\n", e.what());
      curves_warned_ = true;
    }
  }

  // Every rank calls it (the dropout states of every rank's shards go into rank 0's file). The log
  // reaches the disk first: whenever a checkpoint of step s is on disk, so are the log's rows up to s.
  void save(std::int64_t s) {
    CheckpointExtras extras{data_.checkpoint_metadata(), t_.dropout->states()};
    if (csv_) csv_->flush();
    if (root_) {
      distributed::heartbeat(); // the other ranks wait while rank 0 writes
      save_checkpoint(model_path_, *t_.model, t_.optimizer.get(), cfg_, s, extras);
      distributed::heartbeat();
    }
    sum_.checkpoint = model_path_;
    last_saved_ = s;
    end_of_save();
  }

  // The last step is evaluated and saved, unless that happened already in the loop. A stop signal
  // cuts the evaluation short: the step is saved all the same, and the run ends as interrupted.
  void final_evaluation_and_save() {
    const bool evaluated = last_eval_step_ == sum_.steps;
    if (!evaluated) evaluate_at(sum_.steps);
    if (sum_.checkpoint.empty() || !evaluated || o_.save_every > 0) save(sum_.steps);
    if (const Stop stop = agreed_stop(stop_now(false)); stop.signal) {
      g_stop.store(0, std::memory_order_relaxed); // handled
      sum_.interrupted = true;
      sum_.stop_signal = stop.signal;
      progress_.interrupted(sum_.steps, model_path_);
    }
  }

  // For error messages: the newest checkpoint on disk (this run's, else the one it resumed from).
  std::string last_checkpoint() const {
    return !sum_.checkpoint.empty() ? sum_.checkpoint : !o_.resume.empty() ? o_.resume : "(none yet)";
  }

  void summarize(double wall_seconds) {
    const std::size_t k = std::min<std::size_t>(50, sum_.losses.size());
    double recent = 0;
    for (std::size_t i = sum_.losses.size() - k; i < sum_.losses.size(); ++i) recent += sum_.losses[i];
    sum_.loss = k ? recent / static_cast<double>(k) : 0.0;
    sum_.seconds = wall_seconds;
    sum_.train_seconds = train_seconds_;
    sum_.tokens_per_s = train_seconds_ > 0 ? static_cast<double>(tokens_per_step()) *
                                                 static_cast<double>(sum_.losses.size()) / train_seconds_
                                           : 0.0;
    if (t_.across_ranks) sum_.comm = t_.across_ranks->stats();
  }

  const TrainOptions& o_;
  const RunConfig& cfg_;
  const TaskData& data_;
  Trainee t_;
  const optim::LrSchedule schedule_;
  const std::string model_path_;
  const bool root_ = distributed::rank() == 0; // evaluates, prints and writes the output directory
  std::optional<MetricsCsv> csv_;               // rank 0's
  bool curves_warned_ = false;
  Progress progress_;
  TrainSummary sum_;
  double train_seconds_ = 0;
  std::int64_t last_eval_step_ = -1;
  std::int64_t last_saved_ = -1; // the step of this invocation's last save
  const bool continues_log_;
};

// S when the run does not say: one shard per thread of every rank (the threads may differ between
// ranks: their sum), at most one per sequence of the batch. A collective.
std::int64_t default_shards(const TrainOptions& o) {
  std::int64_t threads = 0;
  for (const std::string& t : distributed::allgather(std::to_string(std::max(o.threads, 1)))) threads += std::stoll(t);
  return std::max<std::int64_t>(1, std::min(threads, o.run.batch));
}

// Reference mode trains the book alone: the textbook step, on one thread, composed attention.
void check_reference_mode(const TrainOptions& o, int ranks) {
  std::string conflict;
  if (o.threads > 1) conflict = fmt::format("{} threads", o.threads);
  else if (o.run.shards > 1) conflict = fmt::format("{} shards", o.run.shards);
  else if (ranks > 1) conflict = fmt::format("{} ranks", ranks);
  else if (o.run.attention != "composed") conflict = fmt::format("the {} attention", o.run.attention);
  if (!conflict.empty())
    throw std::invalid_argument(fmt::format("reference mode trains on one thread with one shard, one rank and the "
                                            "composed attention, not {}",
                                            conflict));
}

TrainSummary run_training(const TrainOptions& options, LoadedRun* resumed) {
  const int ranks = distributed::size();
  check_precision(options.run);
  if (runtime::reference()) check_reference_mode(options, ranks);
  distributed::set_rank_timeout(options.rank_timeout);
  if (ranks > 1) check_same_settings(options);
  // Errors that some ranks may see and others not (a directory exists on rank 0's machine only)
  // reach every rank, so that all stop here together.
  std::optional<RunDirectory> out_dir; // held until the run ends (rank 0's)
  std::optional<TaskData> data;
  TrainOptions o = options; // a text run's vocab is its corpus's, and its shard count resolved
  if (o.run.shards == 0) o.run.shards = default_shards(o);
  Trainee trainee;
  distributed::agree([&] {
    data.emplace(o.run);
    if (o.run.is_text()) {
      o.run.vocab = data->vocab_size();
      o.run.gpt_config().validate();
    } else {
      o.run.model_config().validate();
      data::validate(o.run.task_config());
    }
    if (o.run.batch < ranks)
      throw std::invalid_argument(fmt::format("--batch {} is smaller than the {} ranks: each rank needs a sequence of "
                                              "every batch",
                                              o.run.batch, ranks));
    if (o.run.shards > o.run.batch)
      throw std::invalid_argument(fmt::format("--shards {} exceeds --batch {}: every shard needs a sequence of each "
                                              "batch",
                                              o.run.shards, o.run.batch));
    if (o.run.shards < ranks && resumed && resumed->config.shards == o.run.shards)
      throw std::invalid_argument(fmt::format("the checkpoint's {} shards cannot be spread over {} ranks (each rank "
                                              "needs one); resume on at most {} ranks to continue bit for bit, or add "
                                              "--reshard to continue with ranks x threads shards (other bits)",
                                              o.run.shards, ranks, o.run.shards));
    if (o.run.shards < ranks)
      throw std::invalid_argument(fmt::format("--shards {} is fewer than the {} ranks: each rank needs a shard",
                                              o.run.shards, ranks));
    if (o.reshard && !resumed)
      throw std::invalid_argument("--reshard continues a checkpoint with another shard count: it needs --resume");
    // before anything of the size of a batch or the model is allocated
    check_fits_in_memory(training_memory(o.run, ranks, data->corpus() ? static_cast<double>(data->corpus()->tokens.bytes()) : 0,
                                         o.eval_count, o.threads),
                         o.run, distributed::local_size());
    runtime::set_threads(o.threads);
    trainee = trainee_for(o, resumed, *data);
    if (distributed::rank() == 0) out_dir.emplace(o.out_dir, o.resume, o.overwrite);
    // the run continues in the checkpoint's directory (its lock held): a save interrupted there is
    // settled before the next one; a resume from elsewhere leaves its source as it is
    if (out_dir && out_dir->continues_run()) settle_interrupted_save(o.resume, trainee.start);
  });
  if (ranks > 1) {
    check_same_data(*data);
    check_same_start(*trainee.model, *trainee.optimizer);
    trainee.across_ranks = gradient_allreduce_for(*trainee.model, trainee.workers.get(), o.run.shards);
  }
  return TrainingLoop(o, std::move(trainee), *data, out_dir && out_dir->continues_run()).run();
}

} // namespace

void check_precision(const RunConfig& run) {
  if (run.precision != "bf16") return;
  if (runtime::reference())
    throw std::invalid_argument("--precision bf16 runs on the engine: reference mode multiplies in float32 only");
  if (const std::string missing = blas::bf16_missing(); !missing.empty())
    throw std::invalid_argument(fmt::format("--precision bf16: {}", missing));
}

std::string precision_note(const RunConfig& run) {
  if (run.precision != "bf16") return "";
  const std::string slow = blas::bf16_slow_note();
  return slow.empty() ? "" : fmt::format("headgrad: note: {} (--precision bf16 trains all the same)", slow);
}

void install_interrupt_handler() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_signal);
}
void request_stop() { g_stop.store(SIGINT, std::memory_order_relaxed); }
int pending_stop_signal() { return g_stop.load(std::memory_order_relaxed); }
void clear_stop_signal() { g_stop.store(0, std::memory_order_relaxed); }

TrainSummary train(const TrainOptions& o) {
  if (o.resume.empty()) return run_training(o, nullptr);
  LoadedRun resumed = load_model_checkpoint(o.resume);
  return run_training(o, &resumed);
}

TrainSummary train(const TrainOptions& o, LoadedRun resumed) { return run_training(o, &resumed); }

} // namespace headgrad::train
