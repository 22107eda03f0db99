// train_options.hpp - how one invocation of the trainer runs a RunConfig (evaluation and saving
// cadence, resuming, the run directory, the ranks' timeout, what it prints), and the one table of
// those settings, as run_config.hpp has for the run's own: `headgrad train`'s flags and their
// --help defaults, and the settings the ranks of a job compare, come from it.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "train/run/run_config.hpp"

namespace headgrad::train {

// How long a rank waits in a collective without a sign of life from the others before the job
// ends (seconds; see distributed::set_rank_timeout: rank 0 evaluating or saving sends heartbeats,
// which restart the wait). 5 minutes: well above the longest silent wait of a healthy run (a rank
// reading a large corpus or checkpoint at start-up: seconds to a minute here), so that only a rank
// that stopped trips it,
// and a stalled job holds its machines 5 minutes rather than PyTorch's 30 (the default timeout of
// torch.distributed.init_process_group, sized for jobs whose checkpoints take that long).
inline constexpr double kDefaultRankTimeout = 300;

struct TrainOptions {
  RunConfig run;
  std::int64_t eval_every = 500;
  std::int64_t eval_count = 1000;  // held-out sequences
  std::int64_t save_every = 0;     // 0: save at each evaluation
  std::string out_dir;             // created if missing
  std::string resume;              // model.safetensors of an earlier run, or ""
  bool overwrite = false;          // replace another run's checkpoint found in out_dir
  bool reshard = false;            // resume with another shard count than the checkpoint's
  double rank_timeout = kDefaultRankTimeout; // seconds (0: wait forever); several ranks only
  int threads = 1;
  bool json = false;
  bool profile = false;
  bool quiet = false;              // no progress lines (tests)
  double stop_at_seq_acc = 2.0;    // stop early once held-out seq acc reaches this (> 1: never)
};

struct OptionInfo {
  const char* flag;  // command-line flag without dashes; nullptr: programs set it (tests, the bench)
  const char* name;  // what a message calls it: "" for "--flag"
  const char* help;
  Rule rule = {};
  bool same_on_every_rank = true; // compared across the ranks of a job (what is printed may differ)
  const char* metavar = "";
};
// "--eval-every", or the option's name when it has no flag
inline std::string option_name(const OptionInfo& o) { return o.flag ? std::string("--") + o.flag : o.name; }

// The option table: calls visit(OptionInfo, &TrainOptions::member) once per option, in the order of
// `headgrad train --help` (after the run config's fields). run, out_dir and threads are not in it:
// the run has its own table, and the command computes the defaults of the other two (a directory
// named by the time, the cores this process may use).
template <typename Visit> void visit_train_options(Visit&& visit) {
  using O = TrainOptions;
  visit(OptionInfo{"eval-every", "", "evaluate on the held-out set every N steps (0: only at the end)", at_least(0)},
        &O::eval_every);
  visit(OptionInfo{"eval-count", "",
                   "held-out sequences to evaluate on (drawn a chunk at a time: memory does not grow with it); a toy "
                   "task holds out 1 in 16 of its sequences, chosen by a hash of the sequence, and never trains on "
                   "them (a task of under 1000 sequences is refused: too few to split)",
                   at_least(1)},
        &O::eval_count);
  visit(OptionInfo{"save-every", "", "save a checkpoint every N steps (0: at each evaluation)", at_least(0)},
        &O::save_every);
  visit(OptionInfo{"resume", "", "continue from this model.safetensors (its optimizer.safetensors beside it)", {}, true,
                   "CKPT"},
        &O::resume);
  visit(OptionInfo{"overwrite", "",
                   "replace the checkpoint of another run, or a metrics.csv or pictures without one, found in --out"},
        &O::overwrite);
  visit(OptionInfo{"reshard", "",
                   "with --resume: continue with another --shards than the checkpoint's (the run's bits then change)"},
        &O::reshard);
  visit(OptionInfo{"rank-timeout", "",
                   "under MPI: end the job, naming the rank, when a collective has heard nothing from a rank it "
                   "waits for this long (0: wait forever). It measures silence: rank 0 evaluating or saving sends "
                   "the waiting ranks a heartbeat at least every second, which starts their wait again, so a long "
                   "evaluation passes and a stopped or hung rank is found. 5 minutes outlast every silent wait of a "
                   "healthy run (a slow start-up) yet free a stalled job's machines sooner than PyTorch's default of "
                   "30 minutes",
                   at_least(0, " (0: wait forever)"), true, "SECONDS"},
        &O::rank_timeout);
  visit(OptionInfo{"json", "", "print the summary as one JSON object on the last line", {}, false}, &O::json);
  visit(OptionInfo{"profile", "",
                   "print time per op type, forward and backward (with 2+ threads also each thread's time in its "
                   "shards, and the wait for the slowest)",
                   {}, false},
        &O::profile);
  visit(OptionInfo{"quiet", "", "no progress output", {}, false}, &O::quiet);
  visit(OptionInfo{nullptr, "the accuracy to stop at", ""}, &O::stop_at_seq_acc);
}

// "" if `value` keeps the option's rule, else the message: "--eval-count must be at least 1, got 0".
template <typename T> std::string option_rule_error(const OptionInfo& o, const T& value) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) return "";
  else return rule_error(FieldInfo{o.flag ? o.flag : o.name, o.help, Role::compute, o.rule}, value);
}
// A value as text for messages ("yes"/"no" for a switch, "(none)" for empty text; run_config.hpp's
// to_text otherwise).
inline std::string option_text(bool v) { return v ? "yes" : "no"; }
inline std::string option_text(const std::string& v) { return v.empty() ? "(none)" : v; }
template <typename T> std::string option_text(const T& v) { return to_text(v); }

} // namespace headgrad::train
