// main.cpp - the `headgrad` command line: dispatches to a subcommand; any error becomes one
// line on stderr and exit code 2 (no stack trace).
//
// Under mpirun or srun every rank runs main(): `train` trains data-parallel over the ranks and
// `info` reports them; the other commands are single-process tools. Rank 0 alone prints.
#include <cstdio>
#include <exception>
#include <fmt/format.h>
#include <optional>
#include <string>

#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/kernels.hpp"
#include "train/cli/commands.hpp"
#include "train/cli/reference_flags.hpp"
#include "train/loop/train_step.hpp"

namespace {

namespace distributed = headgrad::distributed;

constexpr const char* kUsage =
    "usage: headgrad <command> [flags]\n"
    "\n"
    "commands:\n"
    "  train       train the attention model on a toy task, or a character LM on text (headgrad train --help)\n"
    "  eval        held-out accuracy and examples of a checkpoint (headgrad eval --checkpoint FILE)\n"
    "  gradcheck   run the float64 gradient-check table over every op and model\n"
    "  explain     multi-head attention on a tiny example: every tensor, every gradient, the gradcheck\n"
    "  sample      text from a language model's checkpoint (headgrad sample --checkpoint FILE)\n"
    "  plot        training curves of one or more runs in one SVG (headgrad plot RUN_DIR... --out FILE)\n"
    "  info        BLAS build, active kernel, threads and CPU features (and MPI ranks)\n";

// Prints the one-line error `line` and returns `code`. In a job of several ranks an error that
// every rank raised alike is printed by rank 0 alone and every rank exits; one that only this
// rank may have ends the whole job (MPI_Abort), since the others would wait for it forever.
int fail(const std::string& line, int code, bool every_rank) {
  if (distributed::size() > 1 && !every_rank) {
    std::fputs(fmt::format("{} (rank {} of {}; ending the job)\n", line, distributed::rank(), distributed::size()).c_str(),
               stderr);
    std::fflush(stderr);
    distributed::abort_job(code);
  }
  if (distributed::rank() == 0) std::fputs((line + "\n").c_str(), stderr);
  return code;
}

int run(const std::string& cmd, int argc, char** argv) {
  if (cmd == "train") return headgrad::cli::train_command(argc, argv);
  if (cmd == "info") return headgrad::cli::info_command(argc, argv);
  const bool known = cmd == "eval" || cmd == "gradcheck" || cmd == "explain" || cmd == "plot" || cmd == "sample";
  if (known && distributed::size() > 1)
    throw distributed::CollectiveError(
        fmt::format("{} runs as a single process; start it without mpirun or srun", cmd));
  if (cmd == "eval") return headgrad::cli::eval_command(argc, argv);
  if (cmd == "gradcheck") return headgrad::cli::gradcheck_command(argc, argv);
  if (cmd == "explain") return headgrad::cli::explain_command(argc, argv);
  if (cmd == "plot") return headgrad::cli::plot_command(argc, argv);
  if (cmd == "sample") return headgrad::cli::sample_command(argc, argv);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    if (distributed::rank() == 0) std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd.empty()) { // no command: the usage is the answer
    if (distributed::rank() == 0) std::fputs("headgrad: no command given\n", stderr);
    if (distributed::rank() == 0) std::fputs(kUsage, stderr);
    return 2;
  }
  // An error is one line (the header's promise); the usage is one --help away.
  throw distributed::CollectiveError(fmt::format(
      "unknown command '{}' (commands: train, eval, gradcheck, explain, plot, sample, info; see headgrad --help)", cmd));
}

} // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  // --reference: the book runs alone (framework/engine/kernels.hpp) from the start-up on
  if ((cmd == "train" || cmd == "gradcheck") && headgrad::cli::reference_in_argv(argc, argv))
    headgrad::runtime::set_reference(true);
  headgrad::runtime::configure(argc, argv); // the BLAS kernel and OpenMP wait policy, before MPI starts
  std::optional<distributed::Session> mpi;
  try {
    mpi.emplace(argc, argv); // MPI, when mpirun or srun started this process
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headgrad: %s\n", e.what());
    return 2;
  }
  try {
    return run(cmd, argc, argv);
  } catch (const headgrad::train::NonFiniteError& e) { // every rank checks the same summed values
    return fail(fmt::format("headgrad: {}", e.what()), 3, true);
  } catch (const distributed::CollectiveError& e) { // train's and info's own, or main's about the command
    const bool own = cmd == "train" || cmd == "info";
    return fail(fmt::format("headgrad{}: {}", own ? " " + cmd : "", e.what()), 2, true);
  } catch (const std::exception& e) {
    return fail(fmt::format("headgrad {}: {}", cmd, e.what()), 2, false);
  }
}
