#include "train/fit/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <limits>
#include <optional>

#include "framework/core/autograd.hpp"
#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/distributed/shard_tree.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/runtime/clock.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/ops.hpp"
#include "train/loop/progress.hpp"
#include "train/parallel/dropout_state.hpp"
#include "train/parallel/parallel_step.hpp"
#include "train/parallel/rank_checks.hpp"
#include "train/parallel/rank_shard.hpp"
#include "train/parallel/thread_replicas.hpp"
#include "train/run/checkpoint_files.hpp"
#include "train/run/metrics_csv.hpp"
#include "train/run/run_directory.hpp"

namespace headgrad::train::detail {
namespace {

namespace fs = std::filesystem;

// A Trainer's checkpoint says what it is and the step, shard count and seed it continues with.
constexpr const char* kFormat = "headgrad-trainer-1";
constexpr const char* kRunStatePrefix = "rng."; // the dropout generators (train/parallel/dropout_state.hpp)

std::int64_t metadata_int(const std::map<std::string, std::string>& meta, const std::string& key,
                          const std::string& source) {
  const auto it = meta.find(key);
  if (it == meta.end())
    throw std::invalid_argument(fmt::format("{}: checkpoint metadata lacks '{}'", source, key));
  try {
    std::size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(fmt::format("{}: checkpoint metadata '{}' = '{}' is not a count", source, key, it->second));
}

// The step of a Trainer's checkpoint file, after checking that it is one.
std::int64_t checkpoint_step(const io::SafetensorsFile& f, const std::string& source) {
  const auto it = f.metadata.find("format");
  if (it == f.metadata.end() || it->second != kFormat)
    throw std::invalid_argument(fmt::format("{}: not a train::Trainer checkpoint (format '{}', expected '{}')", source,
                                            it == f.metadata.end() ? "" : it->second, kFormat));
  return metadata_int(f.metadata, "step", source);
}

// Every rank stops after the same step: the largest signal number any rank has pending.
int agreed_stop_signal() {
  const int mine = pending_stop_signal();
  return distributed::size() == 1 ? mine : static_cast<int>(distributed::allreduce_max(mine));
}

} // namespace

struct TrainerCore::State {
  TrainerOptions o;
  Factory factory;
  Loss loss;
  Evaluate evaluate;
  std::function<Batch(std::uint64_t)> data;
  bool root = distributed::rank() == 0;
  std::string model_path;
  std::optional<RunDirectory> dir; // rank 0's, held (locked) for the Trainer's lifetime
  std::unique_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  double initial_lr = 0;
  std::int64_t shards = 1;
  bool textbook = true;
  std::optional<ShardDropout> dropout;
  std::unique_ptr<ThreadReplicas> replicas;
  std::unique_ptr<distributed::BucketedAllreduce> across_ranks;
  std::int64_t start = 0, done = 0;
  std::string checkpoint; // the newest on disk
  bool continues_log = false;

  StepResult step(const Batch& batch, const StepSettings& settings) {
    if (textbook) {
      dropout->load(*model, 0);
      const Tensor l = loss(*model, batch);
      dropout->store(*model, 0);
      return train_step(*optimizer, l, settings);
    }
    const std::int64_t rows = batch.rows();
    const ShardLoss shard_loss = [&](int i, std::int64_t first, std::int64_t count) {
      nn::Module& worker = replicas ? replicas->module(i) : *model;
      const double weight = static_cast<double>(count) / static_cast<double>(rows);
      const Tensor l = loss(worker, batch.slice(first, count));
      return weight == 1.0 ? l : l * weight;
    };
    return sharded_step(*model, *optimizer, rows, shard_loss, settings,
                        {shards, replicas.get(), across_ranks.get(), &*dropout});
  }

  // A collective (the dropout states of every rank's shards); rank 0 writes.
  void save(std::int64_t s, std::optional<MetricsCsv>& csv) {
    const NamedTensors run_state = dropout->states();
    if (root) {
      if (csv) csv->flush(); // the log reaches the disk before the checkpoint of its steps
      const std::map<std::string, std::string> meta = {{"format", kFormat},
                                                       {"step", std::to_string(s)},
                                                       {"shards", std::to_string(shards)},
                                                       {"seed", std::to_string(o.seed)}};
      const NamedTensors state = optimizer->state();
      save_checkpoint_files(model_path, model->named_parameters(), &state, run_state, meta);
    }
    checkpoint = model_path;
  }

  double run_evaluation() {
    const bool was_training = model->training();
    model->train(false);
    double v = 0;
    {
      NoGradGuard no_grad;
      v = evaluate(*model);
    }
    model->train(was_training);
    return v;
  }
};

TrainerCore::TrainerCore(Factory factory, Loss loss, MakeOptimizer make_optimizer,
                         std::function<Batch(std::uint64_t)> data, TrainerOptions options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.o = std::move(options);
  s.factory = std::move(factory);
  s.loss = std::move(loss);
  s.data = std::move(data);
  const TrainerOptions& o = s.o;
  const int ranks = distributed::size();
  if (o.out_dir.empty()) throw std::invalid_argument("train::Trainer: options.out_dir is empty");
  if (o.steps < 1) throw std::invalid_argument(fmt::format("train::Trainer: options.steps is {} (at least 1)", o.steps));
  if (o.threads < 1 || o.shards < 0)
    throw std::invalid_argument(fmt::format("train::Trainer: options.threads {} and options.shards {} (threads >= 1, "
                                            "shards >= 0)",
                                            o.threads, o.shards));
  s.shards = o.shards > 0 ? o.shards : static_cast<std::int64_t>(o.threads) * ranks;
  if (s.shards < ranks)
    throw std::invalid_argument(fmt::format("train::Trainer: {} shards for {} ranks (each rank needs a shard)", s.shards,
                                            ranks));
  if (runtime::reference() && (o.threads > 1 || s.shards > 1 || ranks > 1))
    throw std::invalid_argument(fmt::format("train::Trainer: reference mode trains on one thread with one shard and one "
                                            "rank, not {} threads, {} shards, {} ranks",
                                            o.threads, s.shards, ranks));
  s.textbook = o.threads == 1 && s.shards == 1 && ranks == 1;
  s.model_path = (fs::path(o.out_dir) / "model.safetensors").string();
  std::error_code ec;
  const bool resume = o.resume && fs::exists(s.model_path, ec);
  distributed::agree([&] {
    if (s.root) s.dir.emplace(o.out_dir, resume ? s.model_path : "", o.overwrite);
    runtime::set_threads(o.threads);
    s.model = s.factory();
    if (!s.model) throw std::invalid_argument("train::Trainer: the model factory returned no model");
    s.model->train(true);
    std::optional<io::SafetensorsFile> file;
    if (resume) {
      file.emplace(io::load_safetensors(s.model_path));
      s.start = checkpoint_step(*file, s.model_path);
      const std::int64_t saved_shards = metadata_int(file->metadata, "shards", s.model_path);
      if (saved_shards != s.shards)
        throw std::invalid_argument(fmt::format("{}: the checkpoint was trained with {} shards, this run has {} (the "
                                                "bits depend on the shard count: set options.shards = {})",
                                                s.model_path, saved_shards, s.shards, saved_shards));
      io::restore_parameters(*s.model, file->tensors, s.model_path);
    }
    s.optimizer = make_optimizer(s.model->named_parameters());
    if (!s.optimizer) throw std::invalid_argument("train::Trainer: the optimizer factory returned no optimizer");
    s.initial_lr = s.optimizer->lr();
    const distributed::ShardRange mine = distributed::rank_shards(s.shards, ranks, distributed::rank());
    s.dropout.emplace(ShardDropout::seeded_per_module(*s.model, o.seed, s.shards, mine));
    if (resume) {
      const NamedTensors run_state =
          load_optimizer_state_files(s.model_path, s.start, *s.optimizer, checkpoint_step, kRunStatePrefix);
      s.dropout->restore(run_state, optimizer_path_for(s.model_path));
      if (s.optimizer->steps() != s.start)
        throw std::invalid_argument(fmt::format("{}: optimizer state 'step' is {} but the checkpoint is from step {}",
                                                optimizer_path_for(s.model_path), s.optimizer->steps(), s.start));
      s.checkpoint = s.model_path;
    }
    const int workers = static_cast<int>(std::min<std::int64_t>(o.threads, mine.count()));
    if (workers > 1)
      s.replicas = std::make_unique<ThreadReplicas>(*s.model, workers, [&](int) {
        std::unique_ptr<nn::Module> r = s.factory();
        if (!r) throw std::invalid_argument("train::Trainer: the model factory returned no model");
        return r;
      });
  });
  s.done = s.start;
  s.continues_log = s.dir && s.dir->continues_run();
  if (ranks > 1) {
    check_same_start(*s.model, *s.optimizer); // the factory built the same model on every rank
    s.across_ranks = gradient_allreduce_for(*s.model, s.replicas.get(), s.shards);
  }
}

TrainerCore::~TrainerCore() = default;
TrainerCore::TrainerCore(TrainerCore&&) noexcept = default;

void TrainerCore::set_evaluate(Evaluate evaluate) { s_->evaluate = std::move(evaluate); }
nn::Module& TrainerCore::model() { return *s_->model; }
optim::Optimizer& TrainerCore::optimizer() { return *s_->optimizer; }
std::int64_t TrainerCore::step() const { return s_->done; }

FitSummary TrainerCore::fit() {
  State& s = *s_;
  const TrainerOptions& o = s.o;
  FitSummary sum;
  sum.start = s.done;
  sum.steps = s.done;
  sum.eval_loss = std::numeric_limits<double>::quiet_NaN();
  sum.checkpoint = s.checkpoint;
  const double t_begin = runtime::seconds_now();
  // A signal before the first step: nothing new to save.
  if (const int sig = agreed_stop_signal(); sig != 0) {
    clear_stop_signal();
    sum.interrupted = true;
    sum.stop_signal = sig;
    if (s.root && !o.quiet) fmt::print("stopped by signal {} before step {}: nothing new to save\n", sig, s.done + 1);
    sum.seconds = runtime::seconds_now() - t_begin;
    return sum;
  }
  std::optional<MetricsCsv> csv;
  if (s.root) csv.emplace(o.out_dir, s.continues_log ? std::optional<std::int64_t>(s.done) : std::nullopt);
  s.continues_log = true; // a second fit() continues this one's log
  std::optional<Progress> progress;
  double train_seconds = 0;
  std::int64_t last_eval = -1, last_save = s.checkpoint.empty() ? -1 : s.done;
  auto evaluate_at = [&](std::int64_t step) {
    if (!s.evaluate) return;
    last_eval = step;
    if (!s.root) return; // rank 0 alone evaluates
    sum.eval_loss = s.run_evaluation();
    if (csv) csv->eval_row(step, {sum.eval_loss, std::nan(""), std::nan("")});
    if (!o.quiet) fmt::print("eval  step {:>6}: {:.6f}\n", step, sum.eval_loss);
  };
  auto save_at = [&](std::int64_t step) {
    s.save(step, csv);
    last_save = step;
    sum.checkpoint = s.checkpoint;
  };
  for (std::int64_t step = s.done + 1; step <= o.steps; ++step) {
    const double t0 = runtime::seconds_now();
    const Batch batch = s.data(static_cast<std::uint64_t>(step - 1));
    const double lr = o.lr ? o.lr(step) : s.initial_lr;
    StepResult r;
    try {
      r = s.step(batch, {step, lr, o.clip});
    } catch (const NonFiniteError& e) {
      throw NonFiniteError(fmt::format("{}, the last checkpoint {} is intact", e.what(),
                                       s.checkpoint.empty() ? "(none yet)" : s.checkpoint));
    }
    const double dt = runtime::seconds_now() - t0;
    train_seconds += dt;
    s.done = sum.steps = step;
    sum.losses.push_back(r.loss);
    if (!progress) progress.emplace(o.quiet || !s.root, false, sum.start, o.steps, batch.rows(), false, "rows");
    if (csv) csv->step_row(step, r.loss, lr, static_cast<double>(batch.rows()) / dt);
    progress->step(step, r.loss, lr, train_seconds);
    const int sig = agreed_stop_signal();
    if (step < o.steps && o.eval_every > 0 && step % o.eval_every == 0) evaluate_at(step);
    if (sig != 0 || (step < o.steps && o.save_every > 0 && step % o.save_every == 0)) save_at(step);
    if (sig != 0) {
      clear_stop_signal();
      sum.interrupted = true;
      sum.stop_signal = sig;
      progress->done();
      if (s.root && !o.quiet)
        fmt::print("stopped by signal {} after step {}: checkpoint saved to {} (a Trainer on {} continues it)\n", sig,
                   step, s.model_path, o.out_dir);
      break;
    }
  }
  if (progress) progress->done();
  if (s.across_ranks && sum.steps > sum.start) check_no_drift(*s.model, sum.steps);
  if (!sum.interrupted && sum.steps > sum.start) { // the last step: evaluated and saved
    if (last_eval != sum.steps) evaluate_at(sum.steps);
    if (last_save != sum.steps) save_at(sum.steps);
  }
  sum.seconds = runtime::seconds_now() - t_begin;
  return sum;
}

} // namespace headgrad::train::detail
