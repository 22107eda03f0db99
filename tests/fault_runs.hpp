// fault_runs.hpp - what the fault tests of the command line share (test_faults.cpp,
// test_run_faults.cpp): a tiny, fast run's flags, the command run in a scratch directory, and the
// step numbers metrics.csv holds.
#pragma once
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/test_support.hpp"

namespace test_support {

// A tiny, fast run into `out` (flags given later override these).
inline std::vector<std::string> tiny_run(const std::string& out, std::int64_t steps, std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"train",   "--task",  "copy", "--batch",    "16", "--d-model", "16", "--heads",
                                "2",       "--layers", "1",   "--ffn",      "32", "--max-len", "8",  "--min-len",
                                "2",       "--vocab", "10",   "--threads",  "1",  "--eval-every", "0", "--eval-count",
                                "16",      "--steps", std::to_string(steps), "--out", out};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

inline CliRun cli(const std::vector<std::string>& args, const TempDir& dir) { return run_cli(args, dir.path); }

// The step numbers of metrics.csv's step rows, in file order.
inline std::vector<std::int64_t> step_rows(const std::string& csv) {
  std::vector<std::int64_t> out;
  for (const auto& row : lines_of(csv))
    if (!row.empty() && std::isdigit(static_cast<unsigned char>(row[0])) && row.find(",,,,") == std::string::npos)
      out.push_back(std::stoll(row.substr(0, row.find(','))));
  return out;
}

} // namespace test_support
