// bench_options.hpp - headgrad_bench's flags and what they ask for: timing, which measurements,
// the PyTorch side, output, and the training settings (train::RunConfig's defaults unless given).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_config.hpp"
#include "train/cli/cli_args.hpp"

namespace headgrad::bench {

struct BenchOptions {
  int threads = 1;
  bool quick = false; // a smoke run: the defaults below are a few steps
  std::int64_t warmup_steps = 0, windows = 0, window_steps = 0, profile_steps = 0;
  double sgemm_seconds = 0;
  std::vector<BenchConfig> configs; // to time
  bool tta = true;                  // time to accuracy
  double tta_target = 0;
  std::int64_t tta_eval_every = 0, tta_max_steps = 0, eval_count = 0;
  bool soak = true;
  std::int64_t soak_steps = 0;
  bool no_torch = false;
  std::string python, torch_script, torch_omp_wait_policy;
  bool json = false, keep_tmp = false;
  std::string json_file;
  train::RunConfig settings;       // the training settings of every run
  nlohmann::json settings_source;  // setting's flag -> "flag" | "headgrad train default"
};

std::vector<cli::FlagSpec> bench_flags();
// Throws cli::CliError or std::invalid_argument naming the flag.
BenchOptions bench_options(const cli::Args& args);

} // namespace headgrad::bench
