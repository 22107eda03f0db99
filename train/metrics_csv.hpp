// metrics_csv.hpp - OUT/metrics.csv, the trainer's log: one row per optimizer step
// (step,loss,lr,tokens_per_s,,,) and one per evaluation (step,,,,eval_loss,token_acc,seq_acc).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "train/evaluate.hpp"

namespace headgrad::train {

class MetricsCsv {
public:
  // Creates OUT/metrics.csv with its header, or, with `append` (a resumed run) and a file there,
  // appends to it, so the whole curve stays in one file. Throws std::invalid_argument naming --out.
  MetricsCsv(const std::string& out_dir, bool append);
  void step_row(std::int64_t step, double loss, double lr, double tokens_per_s);
  void eval_row(std::int64_t step, const EvalResult& e);

private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
};

} // namespace headgrad::train
