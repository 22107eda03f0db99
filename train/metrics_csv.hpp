// metrics_csv.hpp - OUT/metrics.csv, the trainer's log: one row per optimizer step
// (step,loss,lr,tokens_per_s,,,) and one per evaluation (step,,,,eval_loss,token_acc,seq_acc);
// written by MetricsCsv, read back by read_metrics_csv (the curves, `headgrad plot`).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "train/evaluate.hpp"

namespace headgrad::train {

class MetricsCsv {
public:
  // Creates OUT/metrics.csv with its header, or, with `append` (a resumed run) and a file there,
  // appends to it, so the whole curve stays in one file (after cutting off a last row a killed run
  // left unfinished). Throws std::invalid_argument naming --out.
  MetricsCsv(const std::string& out_dir, bool append);
  void step_row(std::int64_t step, double loss, double lr, double tokens_per_s);
  void eval_row(std::int64_t step, const EvalResult& e);

private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
};

// A run's log read back, in step order, each step once: a run resumed from an earlier checkpoint
// logs some steps again, and the later row wins (it is the one the run continued from).
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
};

// Reads a metrics.csv, also one a running training is still writing (an unfinished last line is
// left out). Throws std::invalid_argument naming the file (and line) if it cannot be read or is
// not such a log.
MetricsLog read_metrics_csv(const std::string& path);

} // namespace headgrad::train
