// train_command.cpp - `headgrad train`: the flags, a resumed run's settings, the start-up banner,
// the training run and its summary.
#include <algorithm>
#include <ctime>
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/runtime/threads.hpp"
#include "train/cli/blas_core.hpp"
#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/trainer.hpp"

namespace headgrad::cli {
namespace {

std::vector<FlagSpec> train_flags() {
  const std::string cores = std::to_string(runtime::available_cores());
  return {
      {"task", Kind::text, "sort", "toy task: copy, reverse or sort", "NAME"},
      {"steps", Kind::integer, "6000", "total optimizer steps (a resumed run continues up to this)"},
      {"batch", Kind::integer, "64", "sequences per batch"},
      {"d-model", Kind::integer, "64", "model width d"},
      {"heads", Kind::integer, "4", "attention heads (must divide d-model)"},
      {"layers", Kind::integer, "2", "encoder blocks"},
      {"ffn", Kind::integer, "128", "hidden width of the position-wise FFN"},
      {"max-len", Kind::integer, "16", "longest sequence = padded length T"},
      {"min-len", Kind::integer, "4", "shortest sequence"},
      {"vocab", Kind::integer, "16", "vocabulary size V (token 0 is padding)"},
      {"lr", Kind::real, "0.003", "peak learning rate"},
      {"optimizer", Kind::text, "adam", "adam, adamw or sgd", "NAME"},
      {"weight-decay", Kind::real, "0", "weight decay (L2 for adam/sgd, decoupled for adamw)"},
      {"momentum", Kind::real, "0.9", "SGD momentum"},
      {"warmup", Kind::integer, "300", "linear warmup steps"},
      {"schedule", Kind::text, "cosine", "after warmup: constant or cosine decay to 0", "NAME"},
      {"clip", Kind::real, "1", "clip the global gradient norm to this (0: off)"},
      {"dropout", Kind::real, "0", "dropout probability"},
      {"seed", Kind::integer, "0", "seed for initialisation and batches"},
      {"threads", Kind::integer, cores, "threads for all compute (OpenMP; gemms are split over them)"},
      {"eval-every", Kind::integer, "500", "evaluate on the held-out set every N steps (0: only at the end)"},
      {"save-every", Kind::integer, "0", "save a checkpoint every N steps (0: at each evaluation)"},
      {"out", Kind::text, "", "output directory (default: runs/<task>-<timestamp>)", "DIR"},
      {"resume", Kind::text, "", "continue from this model.safetensors (its optimizer.safetensors beside it)", "CKPT"},
      {"json", Kind::flag, "false", "print the summary as one JSON object on the last line"},
      {"profile", Kind::flag, "false", "print time per op type, forward and backward"},
      {"quiet", Kind::flag, "false", "no progress output"},
  };
}

std::string default_out_dir(const std::string& task) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("runs/{}-{}", task, buf);
}

void print_profile() {
  auto rows = profiler_report();
  std::sort(rows.begin(), rows.end(), [](const OpProfile& a, const OpProfile& b) {
    return a.forward_seconds + a.backward_seconds > b.forward_seconds + b.backward_seconds;
  });
  double total = 0;
  for (const auto& r : rows) total += r.forward_seconds + r.backward_seconds;
  fmt::print("\n{:<22} {:>9} {:>11} {:>9} {:>11} {:>10} {:>7}\n", "op", "fwd calls", "fwd ms", "bwd calls", "bwd ms",
             "total ms", "share");
  for (const auto& r : rows)
    fmt::print("{:<22} {:>9} {:>11.2f} {:>9} {:>11.2f} {:>10.2f} {:>6.1f}%\n", r.name, r.forward_calls,
               r.forward_seconds * 1e3, r.backward_calls, r.backward_seconds * 1e3,
               (r.forward_seconds + r.backward_seconds) * 1e3,
               total > 0 ? 100.0 * (r.forward_seconds + r.backward_seconds) / total : 0.0);
  fmt::print("{:<22} {:>9} {:>11} {:>9} {:>11} {:>10.2f}\n", "total (op time)", "", "", "", "", total * 1e3);
  const AllocatorStats a = allocator_stats();
  fmt::print("allocator: {} system allocations, {} served from the cache; {:.1f} MiB in use, {:.1f} MiB cached\n\n",
             a.system_allocs, a.cache_hits, static_cast<double>(a.bytes_in_use) / (1 << 20),
             static_cast<double>(a.bytes_cached) / (1 << 20));
}

} // namespace

int train_command(int argc, char** argv) {
  Args args("train", train_flags());
  args.parse(argc, argv, 2);
  if (args.help()) {
    fmt::print("usage: headgrad train [flags]\n\nTrains the reference multi-head attention model (d2l's Transformer "
               "encoder + output layer) on a toy task,\nshowing progress; writes metrics.csv, model.safetensors, "
               "optimizer.safetensors and attention.svg to --out.\n\nflags:\n{}",
               args.usage());
    return 0;
  }
  train::TrainOptions o;
  train::RunConfig& c = o.run;
  try {
    c.task.task = data::parse_task(args.text("task"));
  } catch (const std::invalid_argument& e) {
    throw CliError(fmt::format("--task: {}", e.what()));
  }
  c.steps = args.integer_at_least("steps", 1);
  c.batch = args.integer_at_least("batch", 1);
  c.model.d_model = args.integer_at_least("d-model", 1);
  c.model.heads = args.integer_at_least("heads", 1);
  c.model.layers = args.integer_at_least("layers", 1);
  c.model.ffn = args.integer_at_least("ffn", 1);
  c.model.max_len = c.task.max_len = args.integer_at_least("max-len", 1);
  c.task.min_len = args.integer_at_least("min-len", 1);
  c.model.vocab = c.task.vocab = args.integer_at_least("vocab", 2);
  c.lr = args.real("lr");
  if (!(c.lr > 0)) throw CliError(fmt::format("--lr must be positive, got {}", c.lr));
  c.optimizer = args.text("optimizer");
  if (c.optimizer != "adam" && c.optimizer != "adamw" && c.optimizer != "sgd")
    throw CliError(fmt::format("--optimizer must be adam, adamw or sgd, got '{}'", c.optimizer));
  c.weight_decay = args.real("weight-decay");
  if (c.weight_decay < 0) throw CliError(fmt::format("--weight-decay must be >= 0, got {}", c.weight_decay));
  c.momentum = args.real("momentum");
  if (c.momentum < 0 || c.momentum >= 1) throw CliError(fmt::format("--momentum must be in [0, 1), got {}", c.momentum));
  c.warmup = args.integer_at_least("warmup", 0);
  c.schedule = args.text("schedule");
  if (c.schedule != "constant" && c.schedule != "cosine")
    throw CliError(fmt::format("--schedule must be constant or cosine, got '{}'", c.schedule));
  c.clip = args.real("clip");
  if (c.clip < 0) throw CliError(fmt::format("--clip must be >= 0 (0 turns clipping off), got {}", c.clip));
  c.model.dropout = args.real("dropout");
  if (!(c.model.dropout >= 0 && c.model.dropout < 1))
    throw CliError(fmt::format("--dropout must be in [0, 1), got {}", c.model.dropout));
  c.seed = static_cast<std::uint64_t>(args.integer_at_least("seed", 0));
  o.threads = static_cast<int>(args.integer_at_least("threads", 1));
  o.eval_every = args.integer_at_least("eval-every", 0);
  o.save_every = args.integer_at_least("save-every", 0);
  o.json = args.flag("json");
  o.profile = args.flag("profile");
  o.quiet = args.flag("quiet");
  o.resume = args.text("resume");
  if (c.model.d_model % c.model.heads != 0)
    throw CliError(fmt::format("--d-model ({}) must be divisible by --heads ({})", c.model.d_model, c.model.heads));
  if (c.task.min_len > c.task.max_len)
    throw CliError(fmt::format("--min-len ({}) must not exceed --max-len ({})", c.task.min_len, c.task.max_len));
  if (c.task.max_len > data::kMaxSeqLen)
    throw CliError(fmt::format("--max-len must be at most {}, got {}", data::kMaxSeqLen, c.task.max_len));
  if (c.task.task == data::Task::sort && c.task.vocab < 3)
    throw CliError(fmt::format("--vocab must be at least 3 for sort (two distinct tokens besides padding), got {}",
                               c.task.vocab));

  if (!o.resume.empty()) {
    // The checkpoint defines the run; flags that would change the model or the data must agree.
    train::LoadedRun loaded = train::load_model_checkpoint(o.resume);
    const train::RunConfig& k = loaded.config;
    auto must_match = [&](const char* flag, auto given, auto stored) {
      if (args.given(flag) && given != stored)
        throw CliError(fmt::format("--{} {} differs from the checkpoint's {} ({}); drop the flag to resume", flag,
                                   given, stored, o.resume));
    };
    must_match("task", std::string(data::task_name(c.task.task)), std::string(data::task_name(k.task.task)));
    must_match("d-model", c.model.d_model, k.model.d_model);
    must_match("heads", c.model.heads, k.model.heads);
    must_match("layers", c.model.layers, k.model.layers);
    must_match("ffn", c.model.ffn, k.model.ffn);
    must_match("max-len", c.model.max_len, k.model.max_len);
    must_match("min-len", c.task.min_len, k.task.min_len);
    must_match("vocab", c.model.vocab, k.model.vocab);
    must_match("batch", c.batch, k.batch);
    must_match("seed", c.seed, k.seed);
    must_match("optimizer", c.optimizer, k.optimizer);
    must_match("dropout", c.model.dropout, k.model.dropout); // the model is rebuilt from the checkpoint
    // The optimizer's hyperparameters may change on resume: flags given on the command line win
    // over the checkpoint's values (before, they were silently replaced by them).
    const train::RunConfig flags = c;
    c = k;
    if (args.given("steps")) c.steps = flags.steps;
    if (args.given("lr")) c.lr = flags.lr;
    if (args.given("weight-decay")) c.weight_decay = flags.weight_decay;
    if (args.given("momentum")) c.momentum = flags.momentum;
    if (args.given("warmup")) c.warmup = flags.warmup;
    if (args.given("schedule")) c.schedule = flags.schedule;
    if (args.given("clip")) c.clip = flags.clip;
    if (c.steps <= loaded.step)
      throw CliError(fmt::format("--steps {} is not beyond the checkpoint's step {}; ask for more steps to resume",
                                 c.steps, loaded.step));
  }
  o.out_dir = args.given("out") ? args.text("out") : default_out_dir(data::task_name(c.task.task));
  if (o.out_dir.empty()) throw CliError("--out needs a directory name");

  const auto blas = runtime::blas_info();
  const std::string notice = blas_core_notice();
  if (!notice.empty()) fmt::print(stderr, "{}\n", notice);
  if (!o.quiet && !o.json)
    fmt::print("headgrad train: task {}, d {}, heads {}, layers {}, ffn {}, vocab {}, len {}..{}, batch {}, {} lr {}, "
               "{} steps{}\nBLAS: OpenBLAS core {}, {} threads; output in {}\n",
               data::task_name(c.task.task), c.model.d_model, c.model.heads, c.model.layers, c.model.ffn,
               c.model.vocab, c.task.min_len, c.task.max_len, c.batch, c.optimizer, c.lr, c.steps,
               o.resume.empty() ? "" : fmt::format(" (resuming {})", o.resume), blas.core, o.threads, o.out_dir);
  train::install_interrupt_handler();
  const train::TrainSummary s = train::train(o);
  if (o.profile) print_profile();
  fmt::print("done: steps {}, loss {:.4f}, token acc {:.4f}, seq acc {:.4f}, {:.0f} tokens/s, {:.1f} s{}\n", s.steps,
             s.loss, s.eval.token_acc, s.eval.seq_acc, s.tokens_per_s, s.seconds,
             s.interrupted ? " (interrupted)" : "");
  if (!o.json) fmt::print("wrote {}/metrics.csv, {}, {}/attention.svg\n", o.out_dir, s.checkpoint, o.out_dir);
  if (o.json)
    fmt::print("{{\"steps\": {}, \"loss\": {:.6f}, \"token_acc\": {:.6f}, \"seq_acc\": {:.6f}, \"eval_loss\": {:.6f}, "
               "\"tokens_per_s\": {:.1f}, \"seconds\": {:.3f}, \"interrupted\": {}, \"out\": \"{}\"}}\n",
               s.steps, s.loss, s.eval.token_acc, s.eval.seq_acc, s.eval.loss, s.tokens_per_s, s.seconds,
               s.interrupted ? "true" : "false", o.out_dir);
  return 0;
}

} // namespace headgrad::cli
