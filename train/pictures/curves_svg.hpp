// curves_svg.hpp - training curves in plain SVG, like the loss and accuracy plots d2l's Animator
// draws while a model trains (d2l.ai, "Linear Neural Networks for Classification"): the training
// loss at every step (faint) and smoothed, the held-out loss, token and sequence accuracy at each
// evaluation, and the learning rate on a panel of its own. Several runs are overlaid, one colour
// each, with a legend.
#pragma once
#include <string>
#include <vector>

#include "train/run/metrics_csv.hpp"

namespace headgrad::train {

struct RunCurves {
  std::string name; // the legend's label, e.g. the run directory
  MetricsLog log;
};

// The training loss smoothed by an exponential moving average with bias correction (as
// TensorBoard's smoothing and Adam's moment estimates): s_t = beta s_(t-1) + (1 - beta) x_t, shown
// as s_t / (1 - beta^t), so the first points are not pulled toward 0. One value per step; a
// non-finite value is passed through and not averaged in. beta = 1 - 1/w averages over about w
// steps: smoothed() takes w as 1% of the values (at least 1, no smoothing), so the curve lags the
// loss by about 1% of the plot's width whatever the run's length.
std::vector<double> smoothed(const std::vector<double>& values, double beta);
std::vector<double> smoothed(const std::vector<double>& values);

// Each run's polylines carry class="train-loss" (smoothed), "train-loss-raw", "eval-loss",
// "token-acc", "seq-acc" or "lr", and data-run="<index of the run>". Bounded whatever the runs'
// lengths: a log of more than 2 * kCurvePoints rows in a series is thinned first (means of
// consecutive rows, train/run/curve_points.hpp), and the legend says how many steps a point stands for.
std::string render_curves_svg(const std::vector<RunCurves>& runs, const std::string& title);

// OUT_DIR/curves.svg of `log` (the run's metrics.csv as MetricsCsv keeps it), written atomically:
// the trainer calls this at every evaluation. Throws std::runtime_error naming the file if the
// picture cannot be written.
void write_run_curves(const std::string& out_dir, const MetricsLog& log);

} // namespace headgrad::train
