// bench_runner.hpp - runs each measurement in fresh processes: the headgrad child (this binary,
// `--child SPEC`) and the PyTorch script, both on a spec written to a temp directory that also
// holds the exported weights and batches.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "bench/bench_options.hpp"

namespace headgrad::bench {

// The OMP_WAIT_POLICY the user started the bench with ("" = unset), carried across the re-exec.
inline constexpr const char* kUserOmpPolicyVar = "HEADGRAD_BENCH_USER_OMP_WAIT_POLICY";

class Runner {
public:
  // Creates the temp directory and finds out whether PyTorch can run.
  explicit Runner(const BenchOptions& o);
  ~Runner(); // removes the temp directory, unless --keep-tmp
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  const std::string& dir() const { return dir_; }
  bool torch() const { return torch_; }
  // {"available", "version" or "reason", "omp_wait_policy"}
  const nlohmann::json& torch_info() const { return torch_info_; }
  // "1.13.0", or "off (why)"
  std::string torch_summary() const;
  // Runs the headgrad child and (if torch and with_torch) the PyTorch script on the spec with
  // `threads` threads each (0: --threads); returns both results ({"error": ...} for a side that
  // failed; null for PyTorch when it did not run). The weights and batches are those exported as
  // `inputs` (export_inputs's tag; "" = `tag`).
  std::pair<nlohmann::json, nlohmann::json> run(nlohmann::json spec, const std::string& tag, bool with_torch,
                                                int threads = 0, const std::string& inputs = "");

private:
  std::optional<std::string> torch_omp_wait_policy() const;

  const BenchOptions& o_;
  std::string dir_;
  bool torch_ = false;
  nlohmann::json torch_info_;
};

} // namespace headgrad::bench
