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
std::vector<std::int64_t> step_rows(const std::string& csv) {
  std::vector<std::int64_t> out;
  for (const auto& row : lines_of(csv))
    if (!row.empty() && std::isdigit(static_cast<unsigned char>(row[0])) && row.find(",,,,") == std::string::npos)
      out.push_back(std::stoll(row.substr(0, row.find(','))));
  return out;
}

// The run: 100 quick steps, then an evaluation of `eval_count` sequences that takes about a
// minute (3,000,000 sequences) - unless stopped.
std::vector<std::string> long_eval_run(const std::string& out, std::vector<std::string> more = {}) {
  std::vector<std::string> a = {HEADGRAD_CLI, "train", "--steps", "100", "--d-model", "16", "--heads", "2", "--layers",
                                "1", "--ffn", "32", "--batch", "8", "--eval-every", "0", "--eval-count", "3000000",
                                "--threads", "1", "--out", out};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Waits until the run evaluates after step `step` (of 100): its progress line for that step is
// printed (every 10 steps, flushed), then a moment more - and the evaluation takes a minute. With
// --json there are no progress lines: metrics.csv's 50-step flush, then long enough for 50 more
// of the tiny model's steps (they take well under a second).
void wait_until_evaluating(const std::string& out, const fs::path& printed, std::int64_t step = 100, bool json = false) {
  REQUIRE(test_support::wait_for_lines(out + "/metrics.csv", 51, 60));
  if (json) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return;
  }
  const std::string line = fmt::format("step {:>6}/100", step);
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (!contains(read_file(printed), line) && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(contains(read_file(printed), line));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

// The child's exit code (or -signal), waited for at most timeout_s (then killed: -9), and how long
// it took.
std::pair<int, double> exit_within(pid_t pid, double timeout_s) {
  const auto t0 = Clock::now();
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (Clock::now() - t0 > std::chrono::duration<double>(timeout_s)) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), seconds};
}

} // namespace

// ---- item 1: a stop signal during an evaluation --------------------------------------------------

TEST_CASE("SIGTERM during the final evaluation: the run saves its last step and exits 143 within a second") {
  TempDir dir;
  const std::string out = dir / "run";
  const pid_t pid = test_support::spawn(long_eval_run(out), dir / "t.out", dir / "t.err", dir.path.string());
  wait_until_evaluating(out, dir / "t.out");
  REQUIRE(kill(pid, SIGTERM) == 0);
  const auto [rc, seconds] = exit_within(pid, 20);
  MESSAGE(fmt::format("SIGTERM during the final evaluation: exit {} after {:.3f} s", rc, seconds));
  INFO("stdout: ", read_file(dir / "t.out"), "\nstderr: ", read_file(dir / "t.err"));
  CHECK(rc == 143);
  CHECK(seconds < 2.0);
  REQUIRE(fs::exists(out + "/model.safetensors"));
  CHECK(train::load_model_checkpoint(out + "/model.safetensors").step == 100);
  CHECK(step_rows(read_file(out + "/metrics.csv")).size() == 100);
  CHECK(contains(read_file(dir / "t.out"), "(interrupted)"));
}

TEST_CASE("SIGTERM during an evaluation in the loop: the step it follows is saved, exit 143 within a second") {
  TempDir dir;
  const std::string out = dir / "run";
  // evaluations at steps 50 and 100: the signal comes in the first one
  const pid_t pid = test_support::spawn(long_eval_run(out, {"--eval-every", "50"}), dir / "t.out", dir / "t.err",
                                        dir.path.string());
  wait_until_evaluating(out, dir / "t.out", 50);
  REQUIRE(kill(pid, SIGTERM) == 0);
  const auto [rc, seconds] = exit_within(pid, 20);
  MESSAGE(fmt::format("SIGTERM during the evaluation at step 50: exit {} after {:.3f} s", rc, seconds));
  INFO("stdout: ", read_file(dir / "t.out"), "\nstderr: ", read_file(dir / "t.err"));
  CHECK(rc == 143);
  CHECK(seconds < 2.0);
  REQUIRE(fs::exists(out + "/model.safetensors"));
  CHECK(train::load_model_checkpoint(out + "/model.safetensors").step == 50);
  const std::string csv = read_file(out + "/metrics.csv");
  CHECK(step_rows(csv).size() == 50);
  CHECK_FALSE(contains(csv, "\n50,,,,")); // the unfinished evaluation is not logged as one
  CHECK(contains(read_file(dir / "t.out"), "interrupted at step 50:"));
}

TEST_CASE("a second SIGTERM during the evaluation or the save does not lose the checkpoint the first one saves") {
  TempDir dir;
  const std::string out = dir / "run";
  // a model of a few MB, so that the save takes a moment
  const pid_t pid = test_support::spawn(long_eval_run(out, {"--d-model", "128", "--ffn", "512", "--layers", "2",
                                                            "--eval-count", "300000"}),
                                        dir / "t.out", dir / "t.err", dir.path.string());
  wait_until_evaluating(out, dir / "t.out");
  REQUIRE(kill(pid, SIGTERM) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  kill(pid, SIGTERM); // as a scheduler that sends TERM twice (it may have exited already)
  const auto [rc, seconds] = exit_within(pid, 20);
  MESSAGE(fmt::format("two SIGTERMs 30 ms apart during the final evaluation: exit {} after {:.3f} s", rc, seconds));
  INFO("stdout: ", read_file(dir / "t.out"), "\nstderr: ", read_file(dir / "t.err"));
  CHECK((rc == 143 || rc == -SIGTERM));
  REQUIRE(fs::exists(out + "/model.safetensors"));
  const train::LoadedRun run = train::load_model_checkpoint(out + "/model.safetensors");
  CHECK(run.step == 100);
  auto opt = train::make_optimizer(run.config, run.model->named_parameters());
  train::load_optimizer_state(out + "/model.safetensors", run.step, *opt); // its optimizer state is there too
  CHECK(dir.temp_files().empty());
}

// ---- item 10: an interrupted run's summary prints what was measured ----------------------------

TEST_CASE("an interrupted run's summary prints no evaluation it did not make (text and --json)") {
  TempDir dir;
  for (const bool json : {false, true}) {
    CAPTURE(json);
    const std::string out = dir / (json ? "json" : "text");
    std::vector<std::string> args = {HEADGRAD_CLI};
    for (const auto& a : tiny_run(out, 1000000, json ? std::vector<std::string>{"--json"} : std::vector<std::string>{}))
      args.push_back(a);
    const pid_t pid = test_support::spawn(args, dir / "s.out", dir / "s.err", dir.path.string());
    REQUIRE(test_support::wait_for_lines(out + "/metrics.csv", 3)); // 100 steps, no evaluation yet
    REQUIRE(kill(pid, SIGTERM) == 0);
    CHECK(exit_within(pid, 60).first == 143);
    const std::string printed = read_file(dir / "s.out");
    INFO("stdout: ", printed);
    CHECK_FALSE(contains(printed, "token acc 0.0000"));
    CHECK_FALSE(contains(printed, "seq acc 0.0000"));
    CHECK_FALSE(contains(printed, "\"token_acc\": 0.000000"));
    CHECK_FALSE(contains(printed, "\"eval_loss\": 0.000000"));
    const std::vector<std::string> lines = lines_of(printed);
    REQUIRE_FALSE(lines.empty());
    if (json) {
      const std::string& last = lines.back();
      CHECK(contains(last, "\"token_acc\": null"));
      CHECK(contains(last, "\"seq_acc\": null"));
      CHECK(contains(last, "\"eval_loss\": null"));
      CHECK(contains(last, "\"eval_step\": null"));
      CHECK(contains(last, "\"interrupted\": true"));
    } else {
      CHECK(contains(printed, ", no evaluation, "));
      CHECK(contains(printed, "(interrupted)"));
    }
  }
}

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

