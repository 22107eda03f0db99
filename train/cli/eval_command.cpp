// eval_command.cpp - `headgrad eval --checkpoint FILE`: held-out accuracy of a checkpoint and a few
// of its predictions.
#include <algorithm>
#include <fmt/format.h>
#include <numbers>

#include "framework/core/autograd.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "train/pictures/attention_svg.hpp"
#include "train/run/checkpoint.hpp"
#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/run/task_data.hpp"
#include "train/loop/trainer.hpp"

namespace headgrad::cli {
namespace {

// A text model's checkpoint: its validation loss on `count` windows of the text it was trained on.
int eval_text(train::LoadedRun& run, const std::string& path, std::int64_t count) {
  const train::TaskData data(run.config);
  data.check_same_text(run.metadata, path);
  const train::EvalResult r = train::evaluate(*run.model, data.eval_rows(count), run.config.context); // streamed
  fmt::print("checkpoint {} (task {}, step {}): {} validation windows of {} tokens from {}: loss {:.4f} ({:.3f} bits "
             "per token), next-token acc {:.4f}\n",
             path, data::task_name(run.config.task), run.step, count, run.config.context, data.corpus() ? data.corpus()->source : run.config.data, r.loss, r.loss / std::numbers::ln2,
             r.token_acc);
  return 0;
}

} // namespace

int eval_command(int argc, char** argv) {
  Args args("eval", {{"checkpoint", Kind::text, "", "model.safetensors written by headgrad train", "FILE"},
                     {"eval-count", Kind::integer, "1000",
                      "held-out sequences to score (as train's --eval-count; drawn a chunk at a time, so memory does not "
                      "grow with it)"},
                     {"count", Kind::integer, "", "the same as --eval-count (its older name)"},
                     {"examples", Kind::integer, "5", "examples to print"},
                     {"svg", Kind::text, "", "draw every layer's and head's attention weights on one example here",
                      "FILE"},
                     {"example", Kind::integer, "0", "which held-out example --svg draws (0 .. count-1)"},
                     {"threads", Kind::integer, std::to_string(runtime::available_cores()), "threads"}});
  args.parse(argc, argv, 2);
  if (args.print_help("eval --checkpoint FILE [flags]",
                      "Held-out loss, token and sequence accuracy of a checkpoint of headgrad train, a few of its\n"
                      "predictions, and (--svg) the attention weights on any held-out example."))
    return 0;
  if (args.text("checkpoint").empty()) throw CliError("--checkpoint FILE is required");
  const std::int64_t count = args.integer_at_least(args.given("count") ? "count" : "eval-count", 1);
  const std::int64_t examples = args.integer_at_least("examples", 0);
  const std::int64_t example = args.integer_at_least("example", 0);
  if (example >= count) throw CliError(fmt::format("--example {} is not below --count {}", example, count));
  runtime::set_threads(thread_count(args));
  train::LoadedRun run = train::load_model_checkpoint(args.text("checkpoint"));
  if (run.config.is_text()) {
    for (const char* toy_only : {"svg", "examples", "example"}) // a toy task's sequences, not a text's windows
      if (args.given(toy_only))
        throw CliError(fmt::format("--{} applies to a toy task's checkpoint; {} is a language model (task text)",
                                   toy_only, args.text("checkpoint")));
    return eval_text(run, args.text("checkpoint"), count);
  }
  // The held-out set is generated a chunk at a time as it is scored: memory does not grow with count.
  const train::TaskData data(run.config);
  const train::EvalResult r = train::evaluate(*run.model, data.eval_rows(count), run.config.max_len);
  fmt::print("checkpoint {} (task {}, step {}): held-out {} sequences: loss {:.4f}, token acc {:.4f}, seq acc {:.4f}\n",
             args.text("checkpoint"), data::task_name(run.config.task), run.step, count, r.loss, r.token_acc,
             r.seq_acc);
  if (examples > 0) {
    NoGradGuard ng;
    run.model->eval();
    const data::Batch b = data.eval_set(std::min(examples, count)); // the set's first rows
    Tensor pred = data::argmax_last(run.model->forward(b.tokens, b.valid_lens));
    const auto lens = b.valid_lens.to_int_vector();
    for (std::size_t i = 0; i < lens.size(); ++i) {
      const auto row = static_cast<std::int64_t>(i);
      const std::string p = data::format_sequence(pred, row, lens[i]), t = data::format_sequence(b.targets, row, lens[i]);
      fmt::print("  {}  ->  {}  (target {}){}\n", data::format_sequence(b.tokens, row, lens[i]), p, t,
                 p == t ? "" : "  WRONG");
    }
  }
  if (!args.text("svg").empty()) {
    try {
      train::write_attention_svg(*run.model, data.eval_example(example),
                                 run.config.task, run.step, args.text("svg"), example);
    } catch (const std::runtime_error&) {
      throw CliError(fmt::format("--svg {}: cannot write", args.text("svg")));
    }
    fmt::print("wrote {} (held-out example {})\n", args.text("svg"), example);
  }
  return 0;
}

} // namespace headgrad::cli
