// commands.hpp - the subcommands of the `headgrad` binary, one file each (<name>_command.cpp).
// Each returns the process exit code; usage errors throw CliError (main prints one line and
// exits 2).
#pragma once

namespace headgrad::cli {

int train_command(int argc, char** argv);     // headgrad train [flags]
int eval_command(int argc, char** argv);      // headgrad eval --checkpoint FILE
int gradcheck_command(int argc, char** argv); // headgrad gradcheck
int info_command(int argc, char** argv);      // headgrad info
int explain_command(int argc, char** argv);   // headgrad explain
int plot_command(int argc, char** argv);      // headgrad plot RUN_DIR...
int sample_command(int argc, char** argv);    // headgrad sample --checkpoint FILE

} // namespace headgrad::cli
