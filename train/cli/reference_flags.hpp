// reference_flags.hpp - `--reference` on the command line (`headgrad train`, `headgrad gradcheck`):
// the book runs alone (runtime::set_reference, framework/engine/kernels.hpp) - every kernel its
// plain loop, one thread, no thread replicas - and training uses d2l's composed attention.
#pragma once
#include <string>

#include "train/cli/cli_args.hpp"
#include "train/run/train_options.hpp"

namespace headgrad::cli {

// The flag's spec, one line of --help.
FlagSpec reference_flag(const std::string& what);

// Whether argv (after the command) holds --reference (or --reference=true): main() switches
// reference mode on before anything else runs (the start-up, MPI), ahead of the command's parse.
bool reference_in_argv(int argc, char** argv);

// After the command's parse: reference mode is on when --reference was given or the environment
// turned it on (HEADGRAD_REFERENCE=1). Returns whether it is.
bool switch_reference_mode(const Args& args);

// `headgrad train` in reference mode: one thread, every batch one shard, the composed attention.
// A flag given with another value is refused with one line naming both (CliError, exit 2):
//   "--reference trains on one thread: --threads 2 conflicts with it"
// as is a checkpoint of several shards resumed without --reshard, and a job of several ranks.
void train_in_reference_mode(const Args& args, train::TrainOptions& options);

} // namespace headgrad::cli
