// train_command.cpp - `headgrad train`: the flags, a resumed run's settings, the start-up banner,
// the training run and its summary. Under mpirun or srun every rank runs it with the same flags
// (checked), and rank 0 alone prints.
#include <algorithm>
#include <ctime>
#include <fmt/format.h>
#include <numbers>
#include <optional>
#include <unistd.h>

#include "framework/core/autograd.hpp"
#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/engine/alloc/caching_allocator.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/profiler.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/cli/reference_flags.hpp"
#include "train/cli/run_config_flags.hpp"
#include "train/pictures/graph_files.hpp"
#include "train/run/memory_estimate.hpp"
#include "train/run/run_model.hpp"
#include "train/run/shell_quote.hpp"
#include "train/run/task_data.hpp"
#include "train/pictures/step_graph.hpp"
#include "train/loop/trainer.hpp"

namespace headgrad::cli {
namespace {

// The run config's flags, then those of this invocation.
std::vector<FlagSpec> train_flags() {
  std::vector<FlagSpec> flags = run_config_flags(RunFields::all);
  const std::string cores = std::to_string(runtime::available_cores());
  flags.insert(flags.end(), {
      {"threads", Kind::integer, cores,
       "threads for all compute: in training each runs shards of the batch (see --shards), in evaluation the ops "
       "are split over them (OpenMP); at most 4 x this machine's cores"},
      {"graph", Kind::text, "",
       "first write the autograd graph of one training step (op, shape, gradient norm per node) as DOT, and SVG "
       "when Graphviz's dot is installed",
       "FILE"},
      {"out", Kind::text, "", "output directory (default: runs/<task>-<timestamp>)", "DIR"},
      reference_flag("train the book alone: every kernel its plain loop, one thread, one shard, d2l's composed "
                     "attention (as HEADGRAD_REFERENCE=1 does)"),
  });
  const std::vector<FlagSpec> options = train_option_flags();
  flags.insert(flags.end(), options.begin(), options.end());
  return flags;
}

// The threads of a rank when --threads is not given: the cores it may use, shared with the other
// ranks on its machine unless the launcher bound each rank to cores of its own.
int default_threads() {
  const int cores = runtime::available_cores(), ranks_here = distributed::local_size();
  const bool bound = cores < static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return ranks_here == 1 || bound ? cores : std::max(1, cores / ranks_here);
}

std::string default_out_dir(const std::string& task) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("runs/{}-{}", task, buf);
}

// What the command line asks for: the options, and the checkpoint a --resume continues (read
// once, here: its config settles the run's, and train() continues from it).
struct TrainRequest {
  train::TrainOptions options;
  std::optional<train::LoadedRun> resumed;
  std::string graph; // --graph FILE
};

TrainRequest train_request(const Args& args) {
  TrainRequest r;
  train::TrainOptions& o = r.options;
  o.run = run_config_from_flags(args, RunFields::all);
  o.threads = args.given("threads") ? thread_count(args) : default_threads();
  read_train_options(args, o);
  r.graph = args.text("graph");
  if (o.reshard && o.resume.empty())
    throw CliError("--reshard continues a checkpoint with another shard count: it needs --resume");
  if (!o.resume.empty()) {
    r.resumed = train::load_model_checkpoint(o.resume);
    o.run = resumed_run_config(args, o.run, *r.resumed, o.resume, o.reshard);
  }
  refuse_flags_for_other_tasks(args, o.run.task); // the task as resumed: the checkpoint's
  if (switch_reference_mode(args)) train_in_reference_mode(args, o);
  try {
    train::check_precision(o.run); // (as resumed: a bf16 checkpoint's run is bf16)
  } catch (const std::invalid_argument& e) {
    throw CliError(e.what());
  }
  o.out_dir = args.given("out") ? args.text("out") : default_out_dir(data::task_name(o.run.task));
  if (o.out_dir.empty()) throw CliError("--out needs a directory name");
  return r;
}

// --graph: the graph of the run's next training step, drawn on a model of its own (the run's
// initial weights, or the checkpoint's) so that the run itself is not touched.
std::string draw_step_graph(const train::TrainOptions& o, const std::string& path) {
  train::LoadedRun resumed;
  std::int64_t done = 0;
  std::unique_ptr<models::TokenModel> model;
  const train::TaskData data(o.run);
  train::RunConfig run = o.run;
  if (run.is_text()) run.vocab = data.vocab_size();
  // the step runs the whole batch in this process: refused as the run would be
  const double corpus = data.corpus() ? static_cast<double>(data.corpus()->tokens.bytes()) : 0.0;
  train::check_fits_in_memory(train::training_memory(run, 1, corpus), run, 1);
  if (o.resume.empty()) {
    model = train::make_model(run, run.seed);
  } else {
    resumed = train::load_model_checkpoint(o.resume);
    model = std::move(resumed.model);
    done = resumed.step;
  }
  // the batch train_step sees at step done + 1
  const data::Batch batch = data.batch(static_cast<std::uint64_t>(done), o.run.batch);
  const Graph g = train::training_step_graph(*model, batch);
  const train::RunConfig& c = o.run;
  const std::string title = fmt::format(
      "one training step (step {}): task {}, d {}, {} heads, {} layers, batch {}; root: the masked cross-entropy; "
      "each node: op, shape, norm of its gradient",
      done + 1, data::task_name(c.task), c.d_model, c.heads, c.layers, c.batch);
  try {
    return train::write_graph_files(path, g, title);
  } catch (const std::runtime_error&) {
    throw CliError(fmt::format("--graph {}: cannot write", path));
  }
}

// The request, read by every rank: an error on any rank (ranks may be given different flags)
// stops every rank here, and rank 0 says why.
std::optional<TrainRequest> train_request_on_every_rank(Args& args, int argc, char** argv) {
  distributed::set_rank_timeout(train::kDefaultRankTimeout); // until the flags say otherwise
  std::optional<TrainRequest> request;
  distributed::agree([&] {
    args.parse(argc, argv, 2);
    if (!args.help()) request = train_request(args);
  });
  return request;
}

void print_banner(const train::TrainOptions& o) {
  const auto blas = runtime::blas_info();
  const std::string notice = runtime::startup_notice();
  if (!notice.empty()) fmt::print(stderr, "{}\n", notice);
  if (const std::string note = train::precision_note(o.run); !note.empty()) fmt::print(stderr, "{}\n", note);
  if (o.quiet || o.json) return;
  const train::RunConfig& c = o.run;
  const int ranks = distributed::size();
  const std::string data = c.task == data::Task::tokens ? fmt::format("token files {}, context {}", c.data, c.context)
                           : c.is_text() ? fmt::format("text {} ({}), context {}", c.text.empty() ? data::kDefaultCorpusDir : c.text,
                                                     c.tokenizer, c.context)
                                       : fmt::format("vocab {}, len {}..{}", c.vocab, c.min_len, c.max_len);
  if (runtime::reference())
    fmt::print("headgrad train: reference mode (every kernel its plain loop, one thread, composed attention)\n");
  fmt::print("headgrad train: task {}, d {}, heads {}, layers {}, ffn {}, {}, batch {}{}, {} lr {}, "
             "{} steps{}{}\nBLAS: OpenBLAS core {}, {} threads{}; output in {}\n",
             data::task_name(c.task), c.d_model, c.heads, c.layers, c.ffn, data, c.batch,
             c.shards > 0 ? fmt::format(" in {} shards", c.shards) : "", c.optimizer, c.lr, c.steps,
             c.precision == "bf16" ? ", precision bf16 (linear layers' gemms)" : "",
             o.resume.empty() ? "" : fmt::format(" (resuming {})", o.resume), blas.core, o.threads,
             ranks > 1 ? fmt::format(" per rank, {} MPI ranks", ranks) : "", o.out_dir);
  std::fflush(stdout); // before a long start-up (a large corpus), also into a file
}

// The gradient all-reduce of rank 0 (the ranks' figures are alike), per step.
void print_communication(const train::TrainSummary& s) {
  const distributed::CommStats& c = s.comm;
  if (s.ranks == 1 || c.steps == 0) return;
  const double steps = static_cast<double>(c.steps);
  fmt::print("all-reduce over {} ranks: {:.2f} MB per step in {} bucket{}; {:.2f} ms per step communicating, {:.0f}% "
             "of it overlapped with backward; {:.2f} ms per step waiting for it ({:.1f}% of the step)\n\n",
             s.ranks, static_cast<double>(c.bytes) / steps / 1e6, c.buckets, c.buckets == 1 ? "" : "s",
             c.comm_seconds / steps * 1e3,
             c.comm_seconds > 0 ? 100.0 * c.overlapped_seconds / c.comm_seconds : 0.0, c.wait_seconds / steps * 1e3,
             s.train_seconds > 0 ? 100.0 * c.wait_seconds / s.train_seconds : 0.0);
}

void print_profile(const train::TrainSummary& s) {
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
  const WorkersProfile w = profiler_workers();
  if (w.steps > 0 && w.seconds.size() > 1) {
    // the threads train their shards at once and the step ends with the slowest: a worker slower
    // than the others on the same work holds every step back
    const double steps = static_cast<double>(w.steps);
    std::string each;
    for (std::size_t i = 0; i < w.seconds.size(); ++i)
      each += fmt::format("{}{:.2f} (worker {})", i ? ", " : "", w.seconds[i] / steps * 1e3, i);
    const auto [lo, hi] = std::minmax_element(w.seconds.begin(), w.seconds.end());
    const double slower = *lo > 0 ? *hi / *lo - 1 : 0.0;
    fmt::print("workers: ms per step in their shards {}; the fastest waited {:.2f} ms per step for the slowest\n", each,
               w.wait_seconds / steps * 1e3);
    if (static_cast<std::int64_t>(s.losses.size()) == w.steps && s.train_seconds > 0) // every step was profiled
      fmt::print("  a step took {:.2f} ms: the slowest worker's shards and {:.2f} ms besides (the batch, adding the "
                 "shards' gradients, clipping, the update)\n",
                 s.train_seconds / steps * 1e3, (s.train_seconds - w.slowest_seconds) / steps * 1e3);
    if (slower >= 0.05) // more than the noise of a quiet machine
      fmt::print("  worker {} took {:.0f}% longer than worker {}: with shards of equal size, its CPU is shared with "
                 "other work or slower\n",
                 hi - w.seconds.begin(), 100.0 * slower, lo - w.seconds.begin());
  }
  const AllocatorStats a = allocator_stats();
  fmt::print("allocator: {} system allocations, {} served from the cache ({} of them a block another thread used "
             "last); {:.1f} MiB in use, {:.1f} MiB cached; {:.0f} MiB of huge-page arenas\n\n",
             a.system_allocs, a.cache_hits, a.other_thread_hits, static_cast<double>(a.bytes_in_use) / (1 << 20),
             static_cast<double>(a.bytes_cached) / (1 << 20), static_cast<double>(a.arena_bytes) / (1 << 20));
}

// The summary's evaluation: what the last completed one measured (and at which step, if not the
// last), or that there was none - an interrupted run does not print numbers it never measured.
std::string summary_evaluation(const train::TrainOptions& o, const train::TrainSummary& s) {
  if (!s.evaluated) return "no evaluation";
  const std::string at = s.eval_step == s.steps ? "" : fmt::format(" (at step {})", s.eval_step);
  if (o.run.is_text())
    return fmt::format("val loss {:.4f} ({:.3f} bits per token){}", s.eval.loss, s.eval.loss / std::numbers::ln2, at);
  return fmt::format("token acc {:.4f}, seq acc {:.4f}{}", s.eval.token_acc, s.eval.seq_acc, at);
}

// A measured number for --json, or null.
std::string json_number(bool measured, double v, int decimals) {
  return measured ? fmt::format("{:.{}f}", v, decimals) : "null";
}

void print_summary(const train::TrainOptions& o, const train::TrainSummary& s) {
  fmt::print("done: steps {}, loss {:.4f}, {}, {:.0f} tokens/s, {:.1f} s{}{}{}\n", s.steps, s.loss,
             summary_evaluation(o, s), s.tokens_per_s, s.seconds, o.run.precision == "bf16" ? ", precision bf16" : "",
             s.reference ? ", reference mode" : "", s.interrupted ? " (interrupted)" : "");
  if (!o.json && o.run.task == data::Task::text) // (a model of token files has no tokenizer to sample text with)
    fmt::print("wrote {}/metrics.csv, {}/curves.svg, {}; sample with: headgrad sample --checkpoint {}\n", o.out_dir,
               o.out_dir, s.checkpoint, train::shell_quote(s.checkpoint));
  else if (!o.json && o.run.is_text())
    fmt::print("wrote {}/metrics.csv, {}/curves.svg, {}\n", o.out_dir, o.out_dir, s.checkpoint);
  else if (!o.json)
    fmt::print("wrote {}/metrics.csv, {}/curves.svg, {}, {}/attention.svg\n", o.out_dir, o.out_dir, s.checkpoint, o.out_dir);
  if (o.json) {
    const distributed::CommStats& c = s.comm;
    const double steps = static_cast<double>(std::max<std::int64_t>(c.steps, 1));
    const std::string comm =
        s.ranks == 1 ? ""
                     : fmt::format(", \"allreduce_bytes_per_step\": {:.0f}, \"comm_seconds_per_step\": {:.6f}, "
                                   "\"comm_overlapped\": {:.4f}, \"comm_wait_seconds_per_step\": {:.6f}",
                                   static_cast<double>(c.bytes) / steps, c.comm_seconds / steps,
                                   c.comm_seconds > 0 ? c.overlapped_seconds / c.comm_seconds : 0.0,
                                   c.wait_seconds / steps);
    // what this invocation did not measure is null: the loss and speed without a step, the
    // evaluation without a completed one
    const bool trained = !s.losses.empty();
    fmt::print("{{\"steps\": {}, \"loss\": {}, \"token_acc\": {}, \"seq_acc\": {}, \"eval_loss\": {}, "
               "\"eval_step\": {}, \"tokens_per_s\": {}, \"train_seconds\": {:.3f}, \"seconds\": {:.3f}, "
               "\"interrupted\": {}, \"ranks\": {}, \"threads\": {}, \"shards\": {}, \"reference\": {}, \"precision\": \"{}\"{}, "
               "\"out\": \"{}\"}}\n",
               s.steps, json_number(trained, s.loss, 6), json_number(s.evaluated, s.eval.token_acc, 6),
               json_number(s.evaluated, s.eval.seq_acc, 6), json_number(s.evaluated, s.eval.loss, 6),
               s.evaluated ? std::to_string(s.eval_step) : "null", json_number(trained, s.tokens_per_s, 1),
               s.train_seconds, s.seconds, s.interrupted ? "true" : "false", s.ranks, o.threads, s.shards,
               s.reference ? "true" : "false", o.run.precision, comm, o.out_dir);
  }
}

} // namespace

int train_command(int argc, char** argv) {
  // First: a Ctrl-C or SIGTERM while the run starts up (reading a checkpoint or a large corpus)
  // is kept and stops the run before its first step, instead of being lost or killing it.
  train::install_interrupt_handler();
  Args args("train", train_flags());
  std::optional<TrainRequest> request = train_request_on_every_rank(args, argc, argv);
  const bool speaks = distributed::rank() == 0;
  if (!request) {
    if (speaks)
      args.print_help(
          "train [flags]",
          "Trains the reference multi-head attention model (d2l's Transformer encoder + output layer) on a toy task,\n"
          "or with --task text a causal character language model (models/gpt.hpp) on a text file,\nshowing progress; "
          "writes metrics.csv, curves.svg (redrawn at every evaluation), model.safetensors,\noptimizer.safetensors "
          "and attention.svg to --out.\nUnder mpirun or srun the ranks train it data-parallel: --batch is the global "
          "batch, cut into --shards shards\nwhose gradients add up in one fixed tree, so that a run has the same bits "
          "on any number of ranks and threads.",
          fmt::format("\nwith --task text (a causal language model on --text; nanoGPT's shakespeare_char recipe at its "
                      "CPU size) the defaults are instead:\n    {}\n(--text, --tokenizer, --context and --tie-weights "
                      "are refused with a toy task, --vocab, --max-len and --min-len with --task text.)\n\n"
                      "Ctrl-C, SIGTERM or SIGHUP saves a checkpoint and exits 130, 143 or 129 (128 + the signal, as "
                      "shells expect),\ncutting an evaluation under way short; during start-up the run stops before its "
                      "first step, saving\nnothing; a second signal ends it at once, or right after the first one's "
                      "checkpoint is written.\nExit 2: a usage error, or a configuration estimated not to fit in this "
                      "machine's memory (refused at\nstart-up with both numbers); 3: a non-finite loss or gradient (the "
                      "last checkpoint is intact).\n",
                      cli::text_defaults_help()));
    return 0;
  }
  const train::TrainOptions& o = request->options;
  if (speaks) print_banner(o);
  if (speaks && !request->graph.empty()) { // drawn on a model of its own: nothing collective
    const std::string wrote = draw_step_graph(o, request->graph);
    if (!o.quiet) fmt::print("{}\n", wrote);
  }
  const train::TrainSummary s = request->resumed ? train::train(o, std::move(*request->resumed)) : train::train(o);
  // A run a signal stopped exits as shells expect of a process that signal ended: 128 + its
  // number (Ctrl-C 130, SIGTERM 143, SIGHUP 129), after its checkpoint was saved.
  const int code = s.interrupted ? 128 + s.stop_signal : 0;
  if (!speaks) return code;
  if (o.profile) print_profile(s);
  if (o.profile) print_communication(s);
  const bool trained = !s.losses.empty();
  if (trained || o.json) print_summary(o, s);
  return code;
}

} // namespace headgrad::cli
