// bench_config.hpp - the benchmark's two configurations of the reference model, small (the
// default `headgrad train` run) and large, each a train::RunConfig with the training settings of
// the bench run.
#pragma once
#include <string>

#include "train/run/run_config.hpp"

namespace headgrad::bench {

// One benchmark configuration: the reference model (models::SequenceModel) on the sort task, with
// a name. `run` holds its shape (Role::shape fields) and the training settings of the bench run.
struct BenchConfig {
  std::string name;
  train::RunConfig run;
  std::string str() const; // "B64 T16 (4-16) d64 h4 L2 ffn128 V16"
};
// The configurations over `settings`, a RunConfig whose training settings (every field that is
// not Role::shape) they take. small has RunConfig{}'s shape: the default `headgrad train` run.
BenchConfig small_config(const train::RunConfig& settings);
BenchConfig large_config(const train::RunConfig& settings);  // B16 T128 d256 h8 L2 ffn1024
BenchConfig long_config(const train::RunConfig& settings);   // B2 T2048 d256 h8 L2 ffn1024
BenchConfig config_by_name(const std::string& name, const train::RunConfig& settings); // throws for others
// "adam lr 0.01, warmup 100, cosine schedule, clip 1, <= 2000 steps, seed 0"
std::string settings_summary(const train::RunConfig& c);

} // namespace headgrad::bench
