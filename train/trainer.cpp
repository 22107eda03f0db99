#include "train/trainer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>

#include "framework/autograd.hpp"
#include "framework/profiler.hpp"
#include "framework/runtime/threads.hpp"
#include "train/attention_svg.hpp"
#include "train/curves_svg.hpp"
#include "train/metrics_csv.hpp"
#include "train/progress.hpp"
#include "train/run_optimizer.hpp"

namespace headgrad::train {
namespace {

namespace fs = std::filesystem;

// Set by the SIGINT handler and by request_stop() from any thread: a lock-free atomic is safe in
// both places (a volatile sig_atomic_t written from another thread would be a data race).
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_sigint(int) { g_stop.store(1, std::memory_order_relaxed); }

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Creates the output directory if it is missing; refuses one that cannot be written.
void prepare_out_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw std::invalid_argument(fmt::format("--out {}: cannot create the directory ({})", dir,
                                            ec ? ec.message() : "exists and is not a directory"));
  if (access(dir.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("--out {}: the directory is not writable", dir));
}

// A resumed run rebuilds the checkpoint's model and continues its batches: every field that must
// match on resume has to, or batches, metadata and model would silently disagree.
void check_resumable(const RunConfig& run, const RunConfig& checkpoint, const std::string& path) {
  std::string differ;
  for (const ResumeConflict& c : resume_conflicts(run, checkpoint))
    differ += fmt::format("{}{} {} (checkpoint: {})", differ.empty() ? "" : ", ", c.field.flag, c.run_value,
                          c.checkpoint_value);
  if (!differ.empty())
    throw std::invalid_argument(fmt::format("{}: the run differs from the checkpoint in what a resumed run keeps: {}",
                                            path, differ));
}

// What a run trains: a fresh model, or the checkpoint's with its optimizer state.
struct Trainee {
  std::unique_ptr<models::SequenceModel> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<ThreadReplicas> workers; // threads > 1: the batch's rows split over threads
  std::int64_t start = 0;                  // steps done before this invocation
};

Trainee trainee_for(const TrainOptions& o, LoadedRun* resumed) {
  Trainee t;
  if (resumed) {
    check_resumable(o.run, resumed->config, o.resume);
    t.model = std::move(resumed->model);
    t.start = resumed->step;
  } else {
    t.model = std::make_unique<models::SequenceModel>(o.run.model_config(), o.run.seed);
  }
  t.optimizer = make_optimizer(o.run, t.model->named_parameters());
  if (resumed) load_optimizer_state(o.resume, t.start, *t.optimizer);
  t.workers = workers_for(*t.model, o.threads, o.run.seed);
  return t;
}

// One invocation: steps start+1 .. run.steps, with evaluations, checkpoints, metrics.csv and
// progress, then the final evaluation, checkpoint and attention picture.
class TrainingLoop {
public:
  TrainingLoop(const TrainOptions& o, Trainee trainee)
      : o_(o), cfg_(o.run), task_(o.run.task_config()), t_(std::move(trainee)), schedule_(lr_schedule(o.run)),
        eval_set_(data::make_eval_set(task_, o.eval_count)),
        model_path_((fs::path(o.out_dir) / "model.safetensors").string()), csv_(o.out_dir, !o.resume.empty()),
        progress_(o.quiet, o.json, t_.start, o.run.steps, tokens_per_step()) {
    sum_.steps = t_.start;
  }

  TrainSummary run() {
    if (o_.profile) {
      profiler_reset();
      profiler_enable(true);
    }
    const double t_begin = now();
    g_stop.store(0, std::memory_order_relaxed);
    for (std::int64_t s = t_.start + 1; s <= cfg_.steps; ++s)
      if (!step(s)) break;
    progress_.done();
    if (o_.profile) profiler_enable(false);
    if (!sum_.interrupted) final_evaluation_and_save();
    write_attention_svg(*t_.model, eval_set_, cfg_.task, sum_.steps, (fs::path(o_.out_dir) / "attention.svg").string());
    summarize(now() - t_begin);
    return sum_;
  }

private:
  std::int64_t tokens_per_step() const { return cfg_.batch * cfg_.max_len; } // padded positions

  // Step s and what follows it (log, progress, evaluation, save); false: stop the run here.
  bool step(std::int64_t s) {
    const double t0 = now();
    const data::Batch batch = data::make_batch(task_, cfg_.seed, static_cast<std::uint64_t>(s - 1), cfg_.batch);
    const double lr = schedule_.at(s);
    StepResult r;
    try {
      r = train_step(*t_.model, *t_.optimizer, batch, {s, lr, cfg_.clip}, nullptr, t_.workers.get());
    } catch (const NonFiniteError& e) {
      throw NonFiniteError(fmt::format("{}, the last checkpoint {} is intact", e.what(), last_checkpoint()));
    }
    const double dt = now() - t0;
    train_seconds_ += dt;
    sum_.steps = s;
    sum_.losses.push_back(r.loss);
    csv_.step_row(s, r.loss, lr, static_cast<double>(tokens_per_step()) / dt);
    progress_.step(s, r.loss, lr, train_seconds_);

    const bool eval_now = o_.eval_every > 0 && s % o_.eval_every == 0;
    if (eval_now) evaluate_at(s);
    if ((o_.save_every > 0 && s % o_.save_every == 0) || (o_.save_every == 0 && eval_now)) save(s);
    if (eval_now && sum_.eval.seq_acc >= o_.stop_at_seq_acc) return false;
    if (g_stop.load(std::memory_order_relaxed)) {
      save(s);
      sum_.interrupted = true;
      progress_.interrupted(s, model_path_);
      return false;
    }
    return true;
  }

  void evaluate_at(std::int64_t s) {
    sum_.eval = evaluate(*t_.model, eval_set_);
    last_eval_step_ = s;
    progress_.eval(s, sum_.eval);
    csv_.eval_row(s, sum_.eval);
    write_run_curves(o_.out_dir);
  }

  void save(std::int64_t s) {
    save_checkpoint(model_path_, *t_.model, t_.optimizer.get(), cfg_, s);
    sum_.checkpoint = model_path_;
  }

  // The last step is evaluated and saved, unless that happened already in the loop.
  void final_evaluation_and_save() {
    const bool evaluated = last_eval_step_ == sum_.steps;
    if (!evaluated) evaluate_at(sum_.steps);
    if (sum_.checkpoint.empty() || !evaluated || o_.save_every > 0) save(sum_.steps);
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
    sum_.tokens_per_s = train_seconds_ > 0 ? static_cast<double>(tokens_per_step()) *
                                                 static_cast<double>(sum_.losses.size()) / train_seconds_
                                           : 0.0;
  }

  const TrainOptions& o_;
  const RunConfig& cfg_;
  const data::TaskConfig task_;
  Trainee t_;
  const optim::LrSchedule schedule_;
  const data::Batch eval_set_;
  const std::string model_path_;
  MetricsCsv csv_;
  Progress progress_;
  TrainSummary sum_;
  double train_seconds_ = 0;
  std::int64_t last_eval_step_ = -1;
};

TrainSummary run_training(const TrainOptions& o, LoadedRun* resumed) {
  o.run.model_config().validate();
  data::validate(o.run.task_config());
  runtime::set_threads(o.threads);
  prepare_out_dir(o.out_dir);
  return TrainingLoop(o, trainee_for(o, resumed)).run();
}

} // namespace

void install_interrupt_handler() { std::signal(SIGINT, on_sigint); }
void request_stop() { g_stop.store(1, std::memory_order_relaxed); }

TrainSummary train(const TrainOptions& o) {
  if (o.resume.empty()) return run_training(o, nullptr);
  LoadedRun resumed = load_model_checkpoint(o.resume);
  return run_training(o, &resumed);
}

TrainSummary train(const TrainOptions& o, LoadedRun resumed) { return run_training(o, &resumed); }

} // namespace headgrad::train
