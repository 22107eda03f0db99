#include "train/trainer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

#include "framework/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/threads.hpp"
#include "train/heatmap_svg.hpp"
#include "train/run_optimizer.hpp"

namespace headgrad::train {
namespace {

// Set by the SIGINT handler and by request_stop() from any thread: a lock-free atomic is safe in
// both places (a volatile sig_atomic_t written from another thread would be a data race).
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_sigint(int) { g_stop.store(1, std::memory_order_relaxed); }

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02}", s / 60, s % 60);
}

bool has_nonfinite(const Tensor& t) {
  bool bad = false;
  dispatch_float(t.dtype(), "check", [&]<typename T>() {
    const T* d = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n && !bad; ++i) bad = !std::isfinite(d[i]);
  });
  return bad;
}

// The first parameter whose gradient holds a NaN or Inf, in registration order ("" if none).
std::string first_nonfinite_grad(const nn::NamedTensors& params) {
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (g.defined() && has_nonfinite(g)) return name;
  }
  return "";
}

// The first parameter whose values hold a NaN or Inf ("" if none): what a non-finite loss is
// usually caused by.
std::string first_nonfinite_param(const nn::NamedTensors& params) {
  for (const auto& [name, p] : params)
    if (has_nonfinite(p)) return name;
  return "";
}

void write_attention_svg(models::SequenceModel& model, const data::Batch& eval_set, const RunConfig& cfg,
                         std::int64_t step, const std::string& path) {
  data::Batch one = data::slice_batch(eval_set, 0, 1);
  const std::int64_t len = one.valid_lens.to_int_vector()[0];
  {
    NoGradGuard ng;
    model.eval();
    Tensor logits = model.forward(one.tokens, one.valid_lens);
    model.train();
    const std::string input = data::format_sequence(one.tokens, 0, len);
    const std::string pred = data::format_sequence(data::argmax_last(logits), 0, len);
    HeatmapGrid grid;
    grid.title = fmt::format("attention weights, task {}, step {}: {} -> {}", data::task_name(cfg.task), step,
                             input, pred);
    const auto toks = one.tokens.to_int_vector();
    for (std::int64_t j = 0; j < len; ++j) {
      grid.query_labels.push_back(std::to_string(toks[static_cast<std::size_t>(j)]));
      grid.key_labels.push_back(std::to_string(toks[static_cast<std::size_t>(j)]));
    }
    const auto weights = model.attention_weights(); // per layer: (1, H, T, T)
    for (std::size_t l = 0; l < weights.size(); ++l) {
      grid.row_titles.push_back(fmt::format("layer {}", l));
      std::vector<Tensor> row;
      for (std::int64_t h = 0; h < cfg.heads; ++h) {
        if (l == 0) grid.col_titles.push_back(fmt::format("head {}", h));
        // (T, T) of head h, cut to the valid queries x keys
        row.push_back(weights[l].slice(1, h, h + 1).reshape({cfg.max_len, cfg.max_len})
                          .slice(0, 0, len).slice(1, 0, len).contiguous());
      }
      grid.maps.push_back(std::move(row));
    }
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << render_heatmaps_svg(grid);
      if (!f) throw std::runtime_error(fmt::format("{}: cannot write", tmp));
    }
    std::filesystem::rename(tmp, path);
  }
}

} // namespace

void install_interrupt_handler() { std::signal(SIGINT, on_sigint); }
void request_stop() { g_stop.store(1, std::memory_order_relaxed); }

EvalResult evaluate(models::SequenceModel& model, const data::Batch& eval_set) {
  NoGradGuard ng;
  const bool was_training = model.training();
  model.eval();
  data::Accuracy acc;
  double loss_sum = 0;
  std::int64_t loss_tokens = 0;
  const std::int64_t n = eval_set.tokens.shape()[0], chunk = 250;
  for (std::int64_t s = 0; s < n; s += chunk) {
    data::Batch b = data::slice_batch(eval_set, s, chunk);
    Tensor logits = model.forward(b.tokens, b.valid_lens);
    Tensor mask = ops::sequence_mask(b.valid_lens, b.tokens.shape()[1]);
    loss_sum += ops::cross_entropy(logits, b.targets, mask).item() * static_cast<double>(b.valid_tokens);
    loss_tokens += b.valid_tokens;
    acc += data::score(data::argmax_last(logits), b);
  }
  model.train(was_training);
  return EvalResult{loss_tokens ? loss_sum / static_cast<double>(loss_tokens) : 0.0, acc.token_acc, acc.seq_acc};
}

namespace {

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

TrainSummary run_training(const TrainOptions& o, LoadedRun* resumed) {
  RunConfig cfg = o.run;
  cfg.model_config().validate();
  data::validate(cfg.task_config());
  runtime::set_threads(o.threads);

  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec || !fs::is_directory(o.out_dir))
    throw std::invalid_argument(fmt::format("--out {}: cannot create the directory ({})", o.out_dir,
                                            ec ? ec.message() : "exists and is not a directory"));
  if (access(o.out_dir.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("--out {}: the directory is not writable", o.out_dir));
  const std::string model_path = (fs::path(o.out_dir) / "model.safetensors").string();

  // Model and optimizer: fresh, or from a checkpoint.
  std::unique_ptr<models::SequenceModel> model;
  std::int64_t start = 0;
  if (resumed) {
    check_resumable(cfg, resumed->config, o.resume);
    model = std::move(resumed->model);
    start = resumed->step;
  } else {
    model = std::make_unique<models::SequenceModel>(cfg.model_config(), cfg.seed);
  }
  const nn::NamedTensors params = model->named_parameters();
  std::vector<Tensor> param_list;
  for (const auto& [n, p] : params) param_list.push_back(p);
  auto opt = make_optimizer(cfg, params);
  if (resumed) load_optimizer_state(o.resume, start, *opt);
  const optim::LrSchedule schedule = lr_schedule(cfg);

  const data::Batch eval_set = data::make_eval_set(cfg.task_config(), o.eval_count);
  const std::int64_t T = cfg.max_len, B = cfg.batch;

  // metrics.csv: appended to on resume, so the whole curve stays in one file.
  const std::string csv_path = (fs::path(o.out_dir) / "metrics.csv").string();
  const bool csv_new = o.resume.empty() || !fs::exists(csv_path);
  std::FILE* csv = std::fopen(csv_path.c_str(), csv_new ? "w" : "a");
  if (!csv) throw std::invalid_argument(fmt::format("--out {}: cannot write metrics.csv", o.out_dir));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv_guard(csv, &std::fclose);
  if (csv_new) fmt::print(csv, "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n");

  const bool tty = isatty(fileno(stdout)) && !o.json;
  const std::int64_t plain_every = std::clamp<std::int64_t>(cfg.steps / 20, 10, 500);
  if (o.profile) {
    profiler_reset();
    profiler_enable(true);
  }

  TrainSummary sum;
  sum.steps = start;
  double train_seconds = 0;
  const double t_begin = now();
  double last_print = 0;
  std::int64_t last_eval_step = -1;
  g_stop.store(0, std::memory_order_relaxed);

  // For error messages: the newest checkpoint on disk (this run's, else the one it resumed from).
  auto last_checkpoint = [&]() -> std::string {
    return !sum.checkpoint.empty() ? sum.checkpoint : !o.resume.empty() ? o.resume : "(none yet)";
  };
  auto save = [&](std::int64_t step) {
    save_checkpoint(model_path, *model, opt.get(), cfg, step);
    sum.checkpoint = model_path;
  };
  auto run_eval = [&](std::int64_t step) {
    sum.eval = evaluate(*model, eval_set);
    last_eval_step = step;
    if (!o.quiet) {
      if (tty) fmt::print("\r\033[K");
      fmt::print("eval  step {:>6}: loss {:.4f}, token acc {:.4f}, seq acc {:.4f}\n", step, sum.eval.loss,
                 sum.eval.token_acc, sum.eval.seq_acc);
      std::fflush(stdout);
    }
    fmt::print(csv, "{},,,,{:.6f},{:.6f},{:.6f}\n", step, sum.eval.loss, sum.eval.token_acc, sum.eval.seq_acc);
    std::fflush(csv);
  };

  for (std::int64_t step = start + 1; step <= cfg.steps; ++step) {
    const double t0 = now();
    const data::Batch batch = data::make_batch(cfg.task_config(), cfg.seed, static_cast<std::uint64_t>(step - 1), B);
    const double lr = schedule.at(step);
    opt->set_lr(lr);
    Tensor logits = model->forward(batch.tokens, batch.valid_lens);               // (B, T, V)
    Tensor loss = ops::cross_entropy(logits, batch.targets, ops::sequence_mask(batch.valid_lens, T));
    const double loss_value = loss.item();
    if (!std::isfinite(loss_value)) {
      const std::string bad = first_nonfinite_param(params);
      throw NonFiniteError(fmt::format("step {}: the loss is {} (first non-finite tensor: {}); training "
                                       "stopped, the last checkpoint {} is intact",
                                       step, loss_value, bad.empty() ? "the loss itself" : "parameter '" + bad + "'",
                                       last_checkpoint()));
    }
    opt->zero_grad();
    loss.backward();
    const double norm = cfg.clip > 0 ? optim::clip_grad_norm(param_list, cfg.clip) : 0.0;
    if (!std::isfinite(norm) || (cfg.clip <= 0 && !first_nonfinite_grad(params).empty())) {
      // A NaN/Inf parameter can hide in the forward (e.g. behind a ReLU) and show up only in
      // other tensors' gradients: name it too.
      const std::string bad = first_nonfinite_param(params);
      throw NonFiniteError(fmt::format("step {}: the gradient of '{}' is not finite{}; training stopped before the "
                                       "update, the last checkpoint {} is intact",
                                       step, first_nonfinite_grad(params),
                                       bad.empty() ? "" : " (parameter '" + bad + "' itself is not finite)",
                                       last_checkpoint()));
    }
    opt->step();
    const double dt = now() - t0;
    train_seconds += dt;
    sum.steps = step;
    sum.losses.push_back(loss_value);
    const double tps = static_cast<double>(B * T) / dt;
    fmt::print(csv, "{},{:.6f},{:.6g},{:.1f},,,\n", step, loss_value, lr, tps);
    if (step % 50 == 0) std::fflush(csv); // someone may be watching the file; a crash loses < 50 rows

    // progress
    const std::int64_t done = step - start, total = cfg.steps - start;
    const double avg_tps = static_cast<double>(B * T * done) / train_seconds;
    const double eta = train_seconds / static_cast<double>(done) * static_cast<double>(total - done);
    if (!o.quiet && tty && (now() - last_print > 0.1 || step == cfg.steps)) {
      const int width = 24;
      const int filled = static_cast<int>(static_cast<double>(width) * static_cast<double>(done) / static_cast<double>(total));
      fmt::print("\r\033[K[{}{}] step {}/{}  loss {:.4f}  {:.0f} tok/s  ETA {}", std::string(filled, '#'),
                 std::string(width - filled, '.'), step, cfg.steps, loss_value, avg_tps, format_eta(eta));
      std::fflush(stdout);
      last_print = now();
    } else if (!o.quiet && !tty && !o.json && (step % plain_every == 0)) {
      fmt::print("step {:>6}/{}  loss {:.4f}  lr {:.3g}  {:.0f} tok/s  ETA {}\n", step, cfg.steps, loss_value, lr,
                 avg_tps, format_eta(eta));
      std::fflush(stdout);
    }

    const bool eval_now = o.eval_every > 0 && step % o.eval_every == 0;
    if (eval_now) run_eval(step);
    if ((o.save_every > 0 && step % o.save_every == 0) || (o.save_every == 0 && eval_now)) save(step);
    if (eval_now && sum.eval.seq_acc >= o.stop_at_seq_acc) break;
    if (g_stop.load(std::memory_order_relaxed)) {
      save(step);
      sum.interrupted = true;
      if (!o.quiet) fmt::print("{}interrupted at step {}: checkpoint saved to {} (continue with --resume {})\n",
                               tty ? "\r\033[K" : "", step, model_path, model_path);
      break;
    }
  }
  if (tty && !o.quiet) fmt::print("\r\033[K");
  if (o.profile) profiler_enable(false);

  if (!sum.interrupted) {
    const bool evaluated = last_eval_step == sum.steps;
    if (!evaluated) run_eval(sum.steps);
    if (sum.checkpoint.empty() || !evaluated || o.save_every > 0) save(sum.steps);
  }
  write_attention_svg(*model, eval_set, cfg, sum.steps, (fs::path(o.out_dir) / "attention.svg").string());

  const std::size_t k = std::min<std::size_t>(50, sum.losses.size());
  double recent = 0;
  for (std::size_t i = sum.losses.size() - k; i < sum.losses.size(); ++i) recent += sum.losses[i];
  sum.loss = k ? recent / static_cast<double>(k) : 0.0;
  sum.seconds = now() - t_begin;
  sum.tokens_per_s = train_seconds > 0 ? static_cast<double>(B * T) * static_cast<double>(sum.losses.size()) / train_seconds : 0.0;
  return sum;
}

} // namespace

TrainSummary train(const TrainOptions& o) {
  if (o.resume.empty()) return run_training(o, nullptr);
  LoadedRun resumed = load_model_checkpoint(o.resume);
  return run_training(o, &resumed);
}

TrainSummary train(const TrainOptions& o, LoadedRun resumed) { return run_training(o, &resumed); }

} // namespace headgrad::train
