// Training curves: curves.svg of a real short run (well-formed, one point per logged step,
// redrawn at every evaluation), metrics.csv read back, the smoothing, and `headgrad plot`
// overlaying runs with a legend.
#include <doctest/doctest.h>

#include <cmath>

#include "train/run/curve_points.hpp"
#include "train/pictures/curves_svg.hpp"
#include "train/loop/trainer.hpp"
#include "tests/svg_check.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace headgrad::train;
using svg_check::attribute_values;
using svg_check::polyline_points;
using test_support::contains;
using test_support::read_file;

namespace {

using test_support::TempDir; // named after this file

// A copy-task run small enough for a test (one thread, d 16).
TrainOptions short_run(const std::string& out_dir, std::int64_t steps, std::int64_t eval_every, double lr) {
  TrainOptions o;
  o.run = RunConfig{.task = data::Task::copy, .steps = steps, .batch = 16, .d_model = 16, .heads = 2, .layers = 1,
                    .ffn = 32, .max_len = 8, .min_len = 2, .vocab = 10, .lr = lr, .warmup = 5};
  o.eval_every = eval_every;
  o.eval_count = 64;
  o.out_dir = out_dir;
  o.quiet = true;
  return o;
}

// The points of the polyline of class `cls` drawn for run `run`.
std::vector<std::pair<double, double>> series(const std::string& svg, const std::string& cls, int run = 0) {
  const auto all = attribute_values(svg, "<polyline class=\"" + cls + "\" data-run=\"" + std::to_string(run) + "\"",
                                    "points");
  REQUIRE(all.size() == 1);
  return polyline_points(all[0]);
}

} // namespace

TEST_CASE("curves.svg of a real run parses and has one point per logged step") {
  TempDir dir;
  const TrainSummary s = train::train(short_run(dir.path.string(), 30, 10, 5e-3));
  REQUIRE(s.steps == 30);
  const std::string svg = read_file(dir / "curves.svg");
  CHECK(svg_check::well_formed(svg) == "");
  const MetricsLog log = read_metrics_csv(dir / "metrics.csv");
  REQUIRE(log.steps.size() == 30);
  REQUIRE(log.evals.size() == 3); // steps 10, 20, 30
  // drawn at the last evaluation: every step is in it (an earlier drawing would have 10 or 20)
  CHECK(series(svg, "train-loss").size() == 30);
  CHECK(series(svg, "train-loss-raw").size() == 30);
  CHECK(series(svg, "lr").size() == 30);
  CHECK(series(svg, "eval-loss").size() == 3);
  CHECK(series(svg, "token-acc").size() == 3);
  CHECK(series(svg, "seq-acc").size() == 3);
  // steps run left to right; the loss falls, so its smoothed curve ends lower (larger y) than it starts
  const auto loss = series(svg, "train-loss");
  for (std::size_t i = 1; i < loss.size(); ++i) CHECK(loss[i].first > loss[i - 1].first);
  CHECK(loss.back().second > loss.front().second);
  CHECK(contains(svg, "held-out sequence accuracy")); // the legend
  CHECK(dir.temp_files().empty());
  CHECK_FALSE(test_support::fs::exists(dir / "curves.svg.tmp"));
}

TEST_CASE("curves.svg is redrawn at every evaluation") {
  TempDir dir;
  TrainOptions o = short_run(dir.path.string(), 20, 10, 5e-3);
  o.stop_at_seq_acc = -1; // stop at the first evaluation (step 10)
  (void)train::train(o);
  CHECK(series(read_file(dir / "curves.svg"), "train-loss").size() == 10);
  o.run.steps = 20;
  o.stop_at_seq_acc = 2;
  o.resume = dir / "model.safetensors";
  (void)train::train(o); // continues to step 20, appending to metrics.csv
  CHECK(series(read_file(dir / "curves.svg"), "train-loss").size() == 20);
}

TEST_CASE("metrics.csv read back: a later row for a step wins, an unfinished line is left out") {
  TempDir dir;
  test_support::write_file(dir / "metrics.csv", "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n"
                                                "1,2.5,0.001,100.0,,,\n"
                                                "2,2.4,0.002,100.0,,,\n"
                                                "2,,,,2.3,0.5,0.25\n"
                                                "2,2.2,0.002,100.0,,,\n" // a resumed run logged step 2 again
                                                "3,2.1,0.003,100.0,,,\n"
                                                "4,2.0,0.0");           // still being written
  const MetricsLog log = read_metrics_csv(dir / "metrics.csv");
  REQUIRE(log.steps.size() == 3);
  CHECK(log.steps[1].step == 2);
  CHECK(log.steps[1].loss == 2.2);
  CHECK(log.steps[2].lr == 0.003);
  REQUIRE(log.evals.size() == 1);
  CHECK(log.evals[0].token_acc == 0.5);
  CHECK(log.evals[0].seq_acc == 0.25);

  test_support::write_file(dir / "other.csv", "a,b\n1,2\n");
  CHECK(contains(test_support::error_of<std::invalid_argument>([&] { (void)read_metrics_csv(dir / "other.csv"); }),
                 "not a headgrad metrics.csv"));
  test_support::write_file(dir / "short.csv", "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n1,2\n");
  CHECK(contains(test_support::error_of<std::invalid_argument>([&] { (void)read_metrics_csv(dir / "short.csv"); }),
                 "short.csv:2:"));
  CHECK(contains(test_support::error_of<std::invalid_argument>([&] { (void)read_metrics_csv(dir / "none.csv"); }),
                 "cannot read"));
}

TEST_CASE("a resumed run appends to the log a killed run left: its cut row dropped, an empty log given a header") {
  TempDir dir;
  const std::string header = "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n";
  test_support::write_file(dir / "metrics.csv", header + "1,2.5,0.001,100.0,,,\n2,2.4,0.0");
  {
    MetricsCsv csv(dir.path.string(), /*resume_step=*/1);
    csv.step_row(2, 2.25, 0.002, 100.0);
  }
  CHECK(read_file(dir / "metrics.csv") == header + "1,2.5,0.001,100.0,,,\n2,2.250000,0.002,100.0,,,\n");
  test_support::write_file(dir / "metrics.csv", ""); // killed before its header reached the disk
  {
    MetricsCsv csv(dir.path.string(), /*resume_step=*/1);
    csv.step_row(1, 2.5, 0.001, 100.0);
  }
  const MetricsLog log = read_metrics_csv(dir / "metrics.csv");
  REQUIRE(log.steps.size() == 1);
  CHECK(log.steps[0].loss == 2.5);
}

TEST_CASE("smoothed: a bias-corrected moving average over 1% of the steps") {
  // bias correction: a constant stays that constant from the first step on
  for (double v : smoothed(std::vector<double>(500, 3.0))) CHECK(v == doctest::Approx(3.0));
  // beta 0.5: s1 = x1, s2 = (0.5 * 0.5 * 4 + 0.5 * 2) / 0.75
  const auto s = smoothed({4.0, 2.0}, 0.5);
  CHECK(s[0] == 4.0);
  CHECK(s[1] == doctest::Approx((0.25 * 4 + 0.5 * 2) / 0.75));
  // up to 100 steps nothing is smoothed; a NaN is passed through and not averaged in
  CHECK(smoothed({1.0, 5.0, 2.0}) == std::vector<double>{1.0, 5.0, 2.0});
  const auto n = smoothed({1.0, NAN, 1.0}, 0.9);
  CHECK(std::isnan(n[1]));
  CHECK(n[2] == doctest::Approx(1.0));
}

TEST_CASE("headgrad plot overlays runs with a legend, and refuses what is not a run") {
  TempDir dir;
  (void)train::train(short_run(dir / "lr-slow", 24, 8, 1e-3));
  (void)train::train(short_run(dir / "lr-fast", 24, 8, 2e-2));
  const test_support::CliRun r = test_support::run_cli({"plot", "lr-slow", "lr-fast/", "--out", "both.svg"}, dir.path);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "wrote both.svg (2 runs)"));
  CHECK(contains(r.out, "  lr-slow: 24 steps"));
  CHECK(contains(r.out, "  lr-fast: 24 steps"));
  const std::string svg = read_file(dir / "both.svg");
  CHECK(svg_check::well_formed(svg) == "");
  for (int run : {0, 1}) {
    CAPTURE(run);
    CHECK(series(svg, "train-loss", run).size() == 24);
    CHECK(series(svg, "eval-loss", run).size() == 3);
  }
  // the legend names both runs, in their colours
  CHECK(contains(svg, "<text x=\"657\" y=\"76\">lr-slow</text>"));
  CHECK(contains(svg, "<text x=\"657\" y=\"94\">lr-fast</text>"));
  CHECK(attribute_values(svg, "<polyline class=\"train-loss\" data-run=\"0\"", "stroke") !=
        attribute_values(svg, "<polyline class=\"train-loss\" data-run=\"1\"", "stroke"));

  const test_support::CliRun help = test_support::run_cli({"plot", "--help"}, dir.path);
  CHECK(help.rc == 0);
  CHECK(contains(help.out, "usage: headgrad plot RUN_DIR... [--out FILE]"));
  CHECK(contains(help.out, "--out FILE"));
  for (const auto& [args, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"plot"}, "give one or more run directories"},
           {{"plot", "missing-run"}, "missing-run: cannot read"},
           {{"plot", "lr-slow", "--out", dir / "no/such/dir/x.svg"}, "cannot write"},
           {{"plot", "lr-slow", "--bogus"}, "unknown flag --bogus"}}) {
    CAPTURE(want);
    const test_support::CliRun bad = test_support::run_cli(args, dir.path);
    const std::string line = test_support::refusal_line(bad);
    CHECK(contains(line, "headgrad plot: "));
    CHECK(contains(line, want));
  }
}

TEST_CASE("a resumed run cuts the log back to its checkpoint's step: each step once, whatever the killed run wrote after") {
  TempDir dir;
  const std::string header = "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n";
  // a run checkpointed at step 2 and killed at step 4, in the middle of a row
  test_support::write_file(dir / "metrics.csv", header + "1,2.5,0.001,100.0,,,\n2,2.4,0.002,100.0,,,\n"
                                                         "2,,,,2.3,0.5,0.25\n3,2.3,0.003,100.0,,,\n"
                                                         "4,2.2,0.004,100.0,,,\n5,2.1");
  {
    MetricsCsv csv(dir.path.string(), /*resume_step=*/2);
    csv.step_row(3, 2.0, 0.003, 100.0);
    csv.flush();
    // what the curves see: the kept rows and the new one
    const MetricsLog log = csv.curves().log();
    REQUIRE(log.steps.size() == 3);
    CHECK(log.steps[2].loss == 2.0);
    CHECK(log.evals.size() == 1);
  }
  CHECK(read_file(dir / "metrics.csv") == header + "1,2.5,0.001,100.0,,,\n2,2.4,0.002,100.0,,,\n2,,,,2.3,0.5,0.25\n"
                                                    "3,2.000000,0.003,100.0,,,\n");
  // not a log: refused, not cut
  test_support::write_file(dir / "metrics.csv", "my notes\n1,2,3\n");
  CHECK(contains(test_support::error_of<std::invalid_argument>([&] { MetricsCsv csv(dir.path.string(), 1); }),
                 "not a headgrad metrics.csv"));
  CHECK(read_file(dir / "metrics.csv") == "my notes\n1,2,3\n");
  // a fresh log is created only where none is (O_EXCL)
  CHECK(contains(test_support::error_of<std::invalid_argument>([&] { MetricsCsv csv(dir.path.string(), std::nullopt); }),
                 "cannot write metrics.csv (it exists)"));
}

TEST_CASE("ThinnedSeries: each point the exact mean of consecutive rows, at most 2 * kCurvePoints of them") {
  ThinnedSeries<2> s;
  const std::int64_t n = 10'000;
  for (std::int64_t i = 1; i <= n; ++i) s.add(i, {static_cast<double>(i), 1.0});
  const auto points = s.points();
  CHECK(points.size() <= 2 * kCurvePoints);
  CHECK(points.size() >= kCurvePoints);
  std::int64_t next = 1, rows = 0;
  for (const auto& p : points) {
    CHECK(p.first_step == next); // consecutive, none lost
    CHECK(p.rows == p.step - p.first_step + 1);
    CHECK(p.values[0] == doctest::Approx(static_cast<double>(p.first_step + p.step) / 2)); // the mean of first..step
    CHECK(p.values[1] == doctest::Approx(1.0));
    next = p.step + 1;
    rows += p.rows;
  }
  CHECK(rows == n);
  CHECK(s.rows_per_point() == points.front().rows);
  // a later row of an earlier step starts the series again from there
  s.cut_from(5000);
  CHECK(s.last_step() < 5000);
  s.add(5000, {1.0, 1.0});
  CHECK(s.points().back().step == 5000);
}
