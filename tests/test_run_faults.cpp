// A run stopped, fed and resumed as an operator would, through the real binary (HEADGRAD_CLI):
// a stop signal during an evaluation (it must interrupt it, save the last finished step and exit
// 143 within about a second, a second signal never losing that checkpoint), the summary of such a
// run (only what was measured), integer flags out of their type's range, checkpoints whose header
// was changed or whose values the flags would refuse, non-finite weights, and a resume into
// another directory (which reads its source and never writes it). Every run, link and file is made
// inside the test's own scratch directory.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <limits>
#include <map>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "framework/io/safetensors.hpp"
#include "train/run/checkpoint.hpp"
#include "train/run/run_optimizer.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
namespace fs = std::filesystem;
using test_support::contains;
using test_support::lines_of;
using test_support::read_file;
using test_support::refusal_line;
using test_support::TempDir;

namespace {

using Clock = std::chrono::steady_clock;

// A tiny, fast run into `out` (flags given later override these).
std::vector<std::string> tiny_run(const std::string& out, std::int64_t steps, std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"train",   "--task",  "copy", "--batch",    "16", "--d-model", "16", "--heads",
                                "2",       "--layers", "1",   "--ffn",      "32", "--max-len", "8",  "--min-len",
                                "2",       "--vocab", "10",   "--threads",  "1",  "--eval-every", "0", "--eval-count",
                                "16",      "--steps", std::to_string(steps), "--out", out};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

test_support::CliRun cli(const std::vector<std::string>& args, const TempDir& dir) {
  return test_support::run_cli(args, dir.path);
}

// The step numbers of metrics.csv's step rows, in file order.

} // namespace

// ---- item 3: integer flags into their real types, --threads bounded ------------------------------

TEST_CASE("integer flags beyond their type or bound are refused in one line: --threads, --precision, --seed") {
  TempDir dir;
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const std::string bound = std::to_string(4 * std::max(cores, 1));
  struct Case {
    std::vector<std::string> args;
    std::string part;
  };
  const std::string ckpt = dir / "run/model.safetensors";
  REQUIRE(cli(tiny_run(dir / "run", 2), dir).rc == 0);
  for (const Case& c : std::vector<Case>{
           {tiny_run(dir / "a", 2, {"--threads", "4294967297"}), "--threads must be at most " + bound},
           {tiny_run(dir / "b", 2, {"--threads", "100000"}), "--threads must be at most " + bound},
           {tiny_run(dir / "c", 2, {"--threads", "1000000000000"}), "--threads must be at most " + bound},
           {tiny_run(dir / "d", 2, {"--threads", "99999999999999999999"}), "--threads must be at most " + bound},
           {{"eval", "--checkpoint", ckpt, "--threads", "4294967297"}, "--threads must be at most " + bound},
           {{"sample", "--checkpoint", ckpt, "--threads", "4294967297"}, "--threads must be at most " + bound},
           {{"explain", "--precision", "4294967297"}, "--precision must be at most"},
           {tiny_run(dir / "e", 2, {"--seed", "18446744073709551616"}), "--seed must be at most 18446744073709551615"},
       }) {
    CAPTURE(c.args);
    const std::string line = refusal_line(cli(c.args, dir));
    CHECK(contains(line, c.part));
  }
  // the bound's text says where it comes from
  CHECK(contains(refusal_line(cli(tiny_run(dir / "f", 2, {"--threads", "100000"}), dir)),
                 fmt::format("(4 x the {} cores of this machine)", cores)));
  // the whole range of a seed (an unsigned 64-bit integer) is a seed
  const auto r = cli(tiny_run(dir / "g", 2, {"--seed", "18446744073709551615"}), dir);
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(train::load_model_checkpoint(dir / "g/model.safetensors").config.seed == 18446744073709551615ull);
  // the bound itself is allowed
  CHECK(cli(tiny_run(dir / "h", 2, {"--threads", bound}), dir).rc == 0);
}

