// gradcheck_command.cpp - `headgrad gradcheck [--filter TEXT]`: runs the gradient-check rows every op
// family and model registers beside its code (framework/checks/registry.hpp) and prints one line
// per row.
#include <fmt/format.h>

#include "framework/checks/registry.hpp"
#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/cli/reference_flags.hpp"

namespace headgrad::cli {

int gradcheck_command(int argc, char** argv) {
  Args args("gradcheck", {{"filter", Kind::text, "", "only cases whose group or name contains this", "TEXT"},
                          reference_flag("check the book alone: every kernel its plain loop, on one thread")});
  args.parse(argc, argv, 2);
  if (args.print_help("gradcheck [--filter TEXT] [--reference]",
                      "Checks every op's and model's backward against central differences in float64\n"
                      "(eps 1e-6, atol 1e-5, rtol 1e-3) and prints one row per case."))
    return 0;
  if (switch_reference_mode(args)) fmt::print("reference mode: every kernel runs its plain loop, on one thread\n");
  const std::string filter = args.text("filter");
  const auto cases = checks::gradcheck_cases();
  fmt::print("{:<10} {:<50} {:<44} {:>11} {:>11}  {}\n", "group", "case", "shapes", "max abs err", "max rel err",
             "result");
  int failed = 0, run = 0;
  for (const auto& c : cases) {
    if (!filter.empty() && c.group.find(filter) == std::string::npos && c.name.find(filter) == std::string::npos)
      continue;
    ++run;
    const checks::GradcheckRow row = checks::run_gradcheck_case(c);
    if (!row.result.ok) ++failed;
    fmt::print("{:<10} {:<50} {:<44} {:>11.2e} {:>11.2e}  {}\n", c.group, c.name, c.shapes, row.max_abs_err,
               row.max_rel_err, row.result.ok ? "PASS" : "FAIL");
    if (!row.result.ok) fmt::print("{}", row.result.summary());
  }
  fmt::print("{} cases, {} passed, {} failed\n", run, run - failed, failed);
  return failed ? 1 : 0;
}

} // namespace headgrad::cli
