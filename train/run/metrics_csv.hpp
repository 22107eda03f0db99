// metrics_csv.hpp - OUT/metrics.csv, the trainer's log: one row per optimizer step
// (step,loss,lr,tokens_per_s,,,) and one per evaluation (step,,,,eval_loss,token_acc,seq_acc);
// written by MetricsCsv, read back by read_metrics_csv (the curves, `headgrad plot`).
//
// The log holds each step once. It reaches the disk with every checkpoint (before the checkpoint
// is written, so a kill at any moment leaves at least the rows of the checkpoint's steps), and a
// run resumed from a checkpoint first cuts the log back to that checkpoint's step: rows written
// after it by the run that was killed are dropped, since the resumed run logs those steps again.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "train/run/curve_points.hpp"
#include "train/run/held_out.hpp"

namespace headgrad::train {

// The log's first line.
inline constexpr const char* kMetricsHeader = "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc";

// A run's log read back, in step order, each step once.
struct MetricsLog {
  struct Step {
    std::int64_t step;
    double loss, lr;
  };
  struct Eval {
    std::int64_t step;
    double loss, token_acc, seq_acc;
  };
  std::vector<Step> steps;
  std::vector<Eval> evals;
  std::int64_t rows_per_point = 1; // > 1: thinned, each step point the mean of this many steps' rows
  std::int64_t last_step = 0;      // the last step row's step: the run's steps so far (0: none)
};

// A log as its curves use it, in bounded memory: rows added one at a time are kept thinned to at
// most 2 * kCurvePoints points per series (train/run/curve_points.hpp: each point the mean of
// consecutive rows). A row for a step at or before the last one of its kind starts the log again
// from there (a resumed run's rows win over those of the run it continued).
class CurveLog {
public:
  void add_step(std::int64_t step, double loss, double lr);
  void add_eval(std::int64_t step, double loss, double token_acc, double seq_acc);
  MetricsLog log() const;
  std::int64_t rows_per_point() const { return steps_.rows_per_point(); } // of the step series

private:
  ThinnedSeries<2> steps_; // loss, lr
  ThinnedSeries<3> evals_; // loss, token_acc, seq_acc
};

class MetricsCsv {
public:
  // Creates OUT/metrics.csv with its header (the run directory made sure that none is there,
  // train/run/run_directory.hpp), or, for a run that continues the checkpoint of step `resume_step`
  // in this directory, continues the log there: its rows after that step and an unfinished last
  // line (a killed run's) are cut off first, and an empty log is given its header. The file is
  // opened with O_NOFOLLOW (and O_EXCL when created): a symbolic link or anything but a regular
  // file is refused, and so is a file whose first line is not the log's header. Throws
  // std::invalid_argument naming --out. A log to continue whose rows are damaged (read_metrics_csv
  // would refuse it) is renamed metrics.csv.damaged (.1, .2, ... if taken), said in one note on
  // stderr, and a fresh log continues: the checkpoint, not the log, is the run.
  MetricsCsv(const std::string& out_dir, std::optional<std::int64_t> resume_step);
  void step_row(std::int64_t step, double loss, double lr, double tokens_per_s);
  void eval_row(std::int64_t step, const EvalResult& e);
  // Writes every buffered row to the file and the file to the disk (fdatasync): the trainer
  // calls it before each checkpoint.
  void flush();
  const CurveLog& curves() const { return curves_; } // every row written or kept, thinned

private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::string path_;
  CurveLog curves_;
};

// Reads a metrics.csv, also one a running training is still writing (an unfinished last line is
// left out), a line at a time into a CurveLog: memory does not grow with the log's length. Throws
// std::invalid_argument naming the file (and line) if it cannot be read, is not a regular file,
// or is not such a log: a first line other than the header, a row that is not 7 fields, a step
// that is not a whole number of at most 18 digits (1e300, nan), a line longer than any row (refused
// as soon as it is, without holding it).
MetricsLog read_metrics_csv(const std::string& path);

} // namespace headgrad::train
