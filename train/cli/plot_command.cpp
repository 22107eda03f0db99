// plot_command.cpp - `headgrad plot RUN_DIR... [--out FILE]`: the training curves of one or more
// runs (each directory's metrics.csv) overlaid in one SVG with a legend, e.g. two learning rates.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "train/cli/cli_args.hpp"
#include "train/cli/commands.hpp"
#include "train/pictures/curves_svg.hpp"
#include "train/pictures/svg_file.hpp"

namespace headgrad::cli {
namespace {

namespace fs = std::filesystem;

// The run's name in the legend: the directory as given, without a trailing '/'.
std::string run_name(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// A loss as the summary shows it: 4 decimals, or 4 significant digits for one far from 1 (a
// diverged run's 1e30 is not printed as 31 digits).
std::string loss_text(double loss) {
  return std::abs(loss) < 1e6 ? fmt::format("{:.4f}", loss) : fmt::format("{:.4g}", loss);
}

// One line per run: what a reader wants before opening the picture.
std::string run_summary(const train::RunCurves& run) {
  const train::MetricsLog& log = run.log;
  if (log.steps.empty()) return fmt::format("  {}: no steps logged yet\n", run.name);
  std::vector<double> losses;
  double lr = 0;
  for (const auto& s : log.steps) {
    losses.push_back(s.loss);
    lr = std::max(lr, s.lr);
  }
  // the run's steps (its last step's number), not the points kept for the picture
  std::string line = fmt::format("  {}: {} steps, lr up to {:.4g}, smoothed training loss {} at the last step",
                                 run.name, log.last_step, lr, loss_text(train::smoothed(losses).back()));
  if (!log.evals.empty())
    line += fmt::format(", held-out seq acc {:.4f} at step {}", log.evals.back().seq_acc, log.evals.back().step);
  return line + "\n";
}

} // namespace

int plot_command(int argc, char** argv) {
  Args args("plot", {{"out", Kind::text, "plot.svg", "the SVG to write", "FILE"},
                     {"title", Kind::text, "", "the picture's title (default: the run directories)", "TEXT"}});
  std::vector<std::string> dirs;
  args.parse(argc, argv, 2, &dirs);
  if (args.print_help("plot RUN_DIR... [--out FILE]",
                      "Draws the training curves of one or more runs of headgrad train (each RUN_DIR's metrics.csv) in "
                      "one SVG:\n"
                      "training loss (every step, faint, and smoothed), held-out loss, token and sequence accuracy, "
                      "and the\n"
                      "learning rate; one colour per run, with a legend. Each run also keeps its own curves.svg."))
    return 0;
  if (dirs.empty()) throw CliError("give one or more run directories (each holding a metrics.csv)");
  const std::string out = args.text("out");
  if (out.empty()) throw CliError("--out needs a file name");
  std::vector<train::RunCurves> runs;
  std::string names;
  for (const std::string& dir : dirs) {
    const std::string csv = fs::is_directory(dir) ? (fs::path(dir) / "metrics.csv").string() : dir;
    try {
      runs.push_back({run_name(dir), train::read_metrics_csv(csv)});
    } catch (const std::invalid_argument& e) {
      throw CliError(e.what());
    }
    names += (names.empty() ? "" : ", ") + runs.back().name;
  }
  const std::string title = args.given("title") ? args.text("title") : "training curves: " + names;
  try {
    train::write_svg_file(out, train::render_curves_svg(runs, title));
  } catch (const std::runtime_error&) {
    throw CliError(fmt::format("--out {}: cannot write", out));
  }
  fmt::print("wrote {} ({} run{})\n", out, runs.size(), runs.size() == 1 ? "" : "s");
  for (const auto& r : runs) fmt::print("{}", run_summary(r));
  return 0;
}

} // namespace headgrad::cli
