// main.cpp - the `headgrad` command line: dispatches to a subcommand; any error becomes one
// line on stderr and exit code 2 (no stack trace).
#include <cstdio>
#include <exception>
#include <fmt/format.h>
#include <string>

#include "train/cli/blas_core.hpp"
#include "train/cli/commands.hpp"
#include "train/train_step.hpp"

namespace {

constexpr const char* kUsage =
    "usage: headgrad <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train       train the reference attention model on a toy task (see headgrad train --help)\n"
    "  eval        held-out accuracy and examples of a checkpoint (headgrad eval --checkpoint FILE)\n"
    "  gradcheck   run the float64 gradient-check table over every op and model\n"
    "  explain     multi-head attention on a tiny example: every tensor, every gradient, the gradcheck\n"
    "  plot        training curves of one or more runs in one SVG (headgrad plot RUN_DIR... --out FILE)\n"
    "  info        BLAS build, active kernel, threads and CPU features\n";

} // namespace

int main(int argc, char** argv) {
  headgrad::cli::maybe_reexec_with_better_blas_core(argc, argv);
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "train") return headgrad::cli::train_command(argc, argv);
    if (cmd == "eval") return headgrad::cli::eval_command(argc, argv);
    if (cmd == "gradcheck") return headgrad::cli::gradcheck_command(argc, argv);
    if (cmd == "info") return headgrad::cli::info_command(argc, argv);
    if (cmd == "explain") return headgrad::cli::explain_command(argc, argv);
    if (cmd == "plot") return headgrad::cli::plot_command(argc, argv);
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cmd.empty()) { // no command: the usage is the answer
      std::fputs("headgrad: no command given\n", stderr);
      std::fputs(kUsage, stderr);
      return 2;
    }
    // An error is one line (the header's promise); the usage is one --help away.
    std::fputs(fmt::format("headgrad: unknown command '{}' (commands: train, eval, gradcheck, explain, plot, info; see "
                           "headgrad --help)\n",
                           cmd)
                   .c_str(),
               stderr);
    return 2;
  } catch (const headgrad::train::NonFiniteError& e) {
    std::fprintf(stderr, "headgrad: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headgrad %s: %s\n", cmd.c_str(), e.what());
    return 2;
  }
}
