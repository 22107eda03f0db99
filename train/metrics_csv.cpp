#include "train/metrics_csv.hpp"

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>

namespace headgrad::train {
namespace {

constexpr const char* kHeader = "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc";

// A number field of a row; empty fields are absent values (false).
bool number(const std::string& field, double& value) {
  if (field.empty()) return false;
  char* end = nullptr;
  value = std::strtod(field.c_str(), &end);
  return *end == '\0';
}

// The length of the log's complete lines: a run killed while writing leaves its last row cut
// short (0 if it died before its header reached the disk).
std::uintmax_t complete_lines_length(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
}

} // namespace

MetricsCsv::MetricsCsv(const std::string& out_dir, bool append) : file_(nullptr, &std::fclose) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(out_dir) / "metrics.csv").string();
  bool fresh = !append || !fs::exists(path);
  if (!fresh) { // a killed run's log: drop its cut row, and an empty log is a fresh one
    const std::uintmax_t keep = complete_lines_length(path);
    std::error_code ec;
    if (keep != fs::file_size(path, ec)) fs::resize_file(path, keep, ec);
    fresh = keep == 0;
  }
  file_.reset(std::fopen(path.c_str(), fresh ? "w" : "a"));
  if (!file_) throw std::invalid_argument(fmt::format("--out {}: cannot write metrics.csv", out_dir));
  if (fresh) fmt::print(file_.get(), "{}\n", kHeader);
  std::fflush(file_.get());
}

void MetricsCsv::step_row(std::int64_t step, double loss, double lr, double tokens_per_s) {
  fmt::print(file_.get(), "{},{:.6f},{:.6g},{:.1f},,,\n", step, loss, lr, tokens_per_s);
  if (step % 50 == 0) std::fflush(file_.get()); // someone may be watching the file; a crash loses < 50 rows
}

void MetricsCsv::eval_row(std::int64_t step, const EvalResult& e) {
  fmt::print(file_.get(), "{},,,,{:.6f},{:.6f},{:.6f}\n", step, e.loss, e.token_acc, e.seq_acc);
  std::fflush(file_.get());
}


MetricsLog read_metrics_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot read", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream lines(text.substr(0, text.rfind('\n') + 1)); // complete lines only
  std::string line;
  if (!std::getline(lines, line) || line != kHeader)
    throw std::invalid_argument(fmt::format("{}: not a headgrad metrics.csv (its first line is not {})", path, kHeader));
  std::map<std::int64_t, MetricsLog::Step> steps;
  std::map<std::int64_t, MetricsLog::Eval> evals;
  for (int number_of_line = 2; std::getline(lines, line); ++number_of_line) {
    std::vector<std::string> f;
    std::istringstream fields(line + ",");
    for (std::string field; std::getline(fields, field, ',');) f.push_back(field);
    double step = 0, a = 0, b = 0, c = 0;
    if (f.size() != 7 || !number(f[0], step))
      throw std::invalid_argument(fmt::format("{}:{}: not a row of 7 fields starting with the step", path, number_of_line));
    const auto s = static_cast<std::int64_t>(step);
    if (number(f[1], a) && number(f[2], b)) steps[s] = {s, a, b};
    if (number(f[4], a) && number(f[5], b) && number(f[6], c)) evals[s] = {s, a, b, c};
  }
  MetricsLog log;
  for (const auto& [s, row] : steps) log.steps.push_back(row);
  for (const auto& [s, row] : evals) log.evals.push_back(row);
  return log;
}

} // namespace headgrad::train
