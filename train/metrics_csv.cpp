#include "train/metrics_csv.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::train {

MetricsCsv::MetricsCsv(const std::string& out_dir, bool append) : file_(nullptr, &std::fclose) {
  const std::string path = (std::filesystem::path(out_dir) / "metrics.csv").string();
  const bool fresh = !append || !std::filesystem::exists(path);
  file_.reset(std::fopen(path.c_str(), fresh ? "w" : "a"));
  if (!file_) throw std::invalid_argument(fmt::format("--out {}: cannot write metrics.csv", out_dir));
  if (fresh) fmt::print(file_.get(), "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n");
}

void MetricsCsv::step_row(std::int64_t step, double loss, double lr, double tokens_per_s) {
  fmt::print(file_.get(), "{},{:.6f},{:.6g},{:.1f},,,\n", step, loss, lr, tokens_per_s);
  if (step % 50 == 0) std::fflush(file_.get()); // someone may be watching the file; a crash loses < 50 rows
}

void MetricsCsv::eval_row(std::int64_t step, const EvalResult& e) {
  fmt::print(file_.get(), "{},,,,{:.6f},{:.6f},{:.6f}\n", step, e.loss, e.token_acc, e.seq_acc);
  std::fflush(file_.get());
}

} // namespace headgrad::train
