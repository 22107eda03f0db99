// run_config_flags.hpp - the run config's fields as command-line flags, all derived from the
// field table (train::visit_run_fields): the flags and their --help defaults, reading them, and
// the settings a --resume continues with. `headgrad train` takes every field; headgrad_bench the
// training settings (its configurations set the shapes).
#pragma once
#include <string>
#include <vector>

#include "train/run/checkpoint.hpp"
#include "train/cli/cli_args.hpp"
#include "train/run/train_options.hpp"

namespace headgrad::cli {

enum class RunFields {
  all,      // every field
  settings, // every field but the shape ones (train::Role::shape)
};
bool selected(RunFields which, const train::FieldInfo& field);

// One flag per selected field; the default shown is RunConfig{}'s value (its initialiser).
std::vector<FlagSpec> run_config_flags(RunFields which);

// One flag per trainer option that has one (train::visit_train_options); the default shown is
// TrainOptions{}'s value.
std::vector<FlagSpec> train_option_flags();
// Those flags read from `args` into `options` (each checked against its rule: CliError, one line).
void read_train_options(const Args& args, train::TrainOptions& options);

// With --task text its other defaults (train::RunConfig::text_defaults(), nanoGPT's CPU recipe):
// the flags whose default differs, "--steps 2000, --batch 12, ..." for --help.
std::string text_defaults_help();

// RunConfig{} (with --task text: RunConfig::text_defaults()) with the selected fields read from
// `args` where given, then validated. Throws CliError, one line naming the flag.
train::RunConfig run_config_from_flags(const Args& args, RunFields which);

// Throws CliError naming the first flag given in `args` that means nothing to `task`
// (train::Applies): "--text applies to --task text only; this run's task is sort". A flag that is
// ignored is a silent surprise; refused, the user learns which flags the run takes.
void refuse_flags_for_other_tasks(const Args& args, data::Task task);

// The settings a run resumed from `checkpoint` (loaded from `path`) continues with: the
// checkpoint's, except the tunable fields given as flags (and with `reshard`, the layout ones,
// their flag's value or default). A flag given for a field that must match, with another value
// than the checkpoint's, is refused; so are --steps not beyond the checkpoint's step.
train::RunConfig resumed_run_config(const Args& args, const train::RunConfig& from_flags,
                                    const train::LoadedRun& checkpoint, const std::string& path, bool reshard = false);

} // namespace headgrad::cli
