// commands.hpp - the subcommands of the `headgrad` binary. Each returns the process exit code;
// usage errors throw cli::CliError (main prints one line and exits 2).
#pragma once

namespace headgrad::commands {

int train(int argc, char** argv);     // headgrad train [flags]
int eval(int argc, char** argv);      // headgrad eval --checkpoint FILE
int gradcheck(int argc, char** argv); // headgrad gradcheck
int info(int argc, char** argv);      // headgrad info
int explain(int argc, char** argv);   // headgrad explain

} // namespace headgrad::commands
