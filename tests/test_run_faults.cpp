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
#include "tests/fault_runs.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
namespace fs = std::filesystem;
using namespace test_support; // contains, read_file, refusal_line, TempDir, ...; tiny_run, cli, step_rows (fault_runs.hpp)

namespace {

using Clock = std::chrono::steady_clock;

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

// Starts long_eval_run(out, more) in `dir` (stdout to t.out, stderr to t.err), waits until it
// evaluates after step `step` and sends it SIGTERM. Returns the child.
pid_t terminated_while_evaluating(const TempDir& dir, const std::string& out, const std::vector<std::string>& more,
                                  std::int64_t step) {
  const pid_t pid = test_support::spawn(long_eval_run(out, more), dir / "t.out", dir / "t.err", dir.path.string());
  wait_until_evaluating(out, dir / "t.out", step);
  REQUIRE(kill(pid, SIGTERM) == 0);
  return pid;
}

// One SIGTERM while the run in `dir`/run evaluates after step `step` (`when` says which evaluation):
// what every such stop must do - exit 143 within 2 s, its checkpoint at `step` and `step` rows in
// metrics.csv - then the case's own checks of metrics.csv and stdout, with stdout and stderr shown
// when any check fails.
void check_sigterm_during_evaluation(const TempDir& dir, const std::vector<std::string>& more, std::int64_t step,
                                     const std::string& when,
                                     const std::function<void(const std::string& csv, const std::string& printed)>& also) {
  const std::string out = dir / "run";
  const auto [rc, seconds] = exit_within(terminated_while_evaluating(dir, out, more, step), 20);
  MESSAGE(fmt::format("SIGTERM during {}: exit {} after {:.3f} s", when, rc, seconds));
  INFO("stdout: ", read_file(dir / "t.out"), "\nstderr: ", read_file(dir / "t.err"));
  CHECK(rc == 143);
  CHECK(seconds < 2.0);
  REQUIRE(fs::exists(out + "/model.safetensors"));
  CHECK(train::load_model_checkpoint(out + "/model.safetensors").step == step);
  const std::string csv = read_file(out + "/metrics.csv");
  CHECK(step_rows(csv).size() == static_cast<std::size_t>(step));
  also(csv, read_file(dir / "t.out"));
}

} // namespace

// ---- item 1: a stop signal during an evaluation --------------------------------------------------

TEST_CASE("SIGTERM during the final evaluation: the run saves its last step and exits 143 within a second") {
  TempDir dir;
  check_sigterm_during_evaluation(dir, {}, 100, "the final evaluation",
                                  [](const std::string&, const std::string& printed) {
                                    CHECK(contains(printed, "(interrupted)"));
                                  });
}

TEST_CASE("SIGTERM during an evaluation in the loop: the step it follows is saved, exit 143 within a second") {
  TempDir dir;
  // evaluations at steps 50 and 100: the signal comes in the first one
  check_sigterm_during_evaluation(dir, {"--eval-every", "50"}, 50, "the evaluation at step 50",
                                  [](const std::string& csv, const std::string& printed) {
                                    // the unfinished evaluation is not logged as one
                                    CHECK_FALSE(contains(csv, "\n50,,,,"));
                                    CHECK(contains(printed, "interrupted at step 50:"));
                                  });
}

TEST_CASE("a second SIGTERM during the evaluation or the save does not lose the checkpoint the first one saves") {
  TempDir dir;
  const std::string out = dir / "run";
  // a model of a few MB, so that the save takes a moment
  const pid_t pid = terminated_while_evaluating(
      dir, out, {"--d-model", "128", "--ffn", "512", "--layers", "2", "--eval-count", "300000"}, 100);
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

// ---- item 4: a resumed configuration is validated as the flags are; the header is checked -------

namespace {

// A tiny 3-step run into `out`, its checkpoint loaded, altered by `change` (its weights, its
// config) and saved again to the model file `to` (the optimizer file beside it) with the checkpoint
// writer, so that every checksum it writes is right. The optimizer state and the metadata entries
// that are not the run's own are carried over.
void resaved_tiny_run(const TempDir& dir, const std::string& out, const std::string& to,
                      const std::function<void(train::LoadedRun&)>& change) {
  const std::string model = out + "/model.safetensors";
  REQUIRE(cli(tiny_run(out, 3), dir).rc == 0);
  train::LoadedRun run = train::load_model_checkpoint(model);
  auto opt = train::make_optimizer(run.config, run.model->named_parameters());
  const NamedTensors state = train::load_optimizer_state(model, run.step, *opt);
  std::map<std::string, std::string> extras;
  for (const auto& [k, v] : run.metadata)
    if (!train::run_metadata(run.config, run.step).count(k) && k != "header_crc32c") extras[k] = v;
  change(run);
  train::save_checkpoint(to, *run.model, opt.get(), run.config, run.step, {extras, state});
}

// A checkpoint of a tiny 3-step run in dir/`name`, its config changed by `change` and saved again
// (resaved_tiny_run) over the model file, the optimizer file or both.
std::string rewritten_checkpoint(const TempDir& dir, const std::string& name,
                                 const std::function<void(train::RunConfig&)>& change,
                                 bool model_file = true, bool optimizer_file = true) {
  const std::string out = dir / name, model = out + "/model.safetensors";
  const std::string scratch = dir / (name + "_scratch");
  fs::create_directories(scratch);
  resaved_tiny_run(dir, out, scratch + "/model.safetensors", [&](train::LoadedRun& run) { change(run.config); });
  if (model_file) fs::copy_file(scratch + "/model.safetensors", model, fs::copy_options::overwrite_existing);
  if (optimizer_file)
    fs::copy_file(scratch + "/optimizer.safetensors", out + "/optimizer.safetensors", fs::copy_options::overwrite_existing);
  return model;
}

std::vector<std::string> resume(const std::string& model, std::int64_t steps) {
  return {"train", "--resume", model, "--steps", std::to_string(steps), "--out",
          fs::path(model).parent_path().string(), "--quiet"};
}

} // namespace

TEST_CASE("a resumed checkpoint's values are checked as the flags are: lr -1, clip nan, momentum 7, schedule weird, "
          "min-lr > lr") {
  TempDir dir;
  struct Case {
    const char* name;
    std::function<void(train::RunConfig&)> change;
    std::string part;
  };
  for (const Case& c : std::vector<Case>{
           {"lr", [](train::RunConfig& r) { r.lr = -1; }, "--lr must be positive, got -1"},
           {"clip", [](train::RunConfig& r) { r.clip = std::numeric_limits<double>::quiet_NaN(); }, "--clip must be >= 0"},
           {"momentum", [](train::RunConfig& r) { r.momentum = 7; }, "--momentum must be in [0, 1), got 7"},
           {"schedule", [](train::RunConfig& r) { r.schedule = "weird"; }, "--schedule must be constant or cosine, got 'weird'"},
           {"minlr", [](train::RunConfig& r) { r.min_lr = 0.5; }, "--min-lr (0.5) must not exceed --lr (0.01)"},
       }) {
    CAPTURE(c.name);
    const std::string model = rewritten_checkpoint(dir, c.name, c.change);
    const std::string line = refusal_line(cli(resume(model, 6), dir));
    CHECK(contains(line, model));
    CHECK(contains(line, c.part));
    // eval reads the same checkpoint with the same checks
    CHECK(contains(refusal_line(cli({"eval", "--checkpoint", model}, dir)), c.part));
  }
}

TEST_CASE("a checkpoint's header is covered by a checksum: a flipped digit of lr, seed or warmup is refused") {
  TempDir dir;
  const std::string out = dir / "run", model = out + "/model.safetensors";
  REQUIRE(cli(tiny_run(out, 3), dir).rc == 0);
  const std::string original = read_file(model);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"lr\":\"0.01\"", "\"lr\":\"0.03\""}, {"\"seed\":\"0\"", "\"seed\":\"1\""},
           {"\"warmup\":\"100\"", "\"warmup\":\"900\""}}) {
    CAPTURE(from);
    std::string bytes = original;
    const auto at = bytes.find(from);
    REQUIRE(at != std::string::npos);
    bytes.replace(at, from.size(), to); // the same length: the file stays well-formed
    test_support::write_file(model, bytes);
    const std::string line = refusal_line(cli(resume(model, 6), dir));
    CHECK(contains(line, model));
    CHECK(contains(line, "header fails its checksum"));
  }
  test_support::write_file(model, original);
  CHECK(cli(resume(model, 6), dir).rc == 0);
}

TEST_CASE("--resume compares the optimizer file's metadata with the model file's") {
  TempDir dir;
  // the optimizer file of a run with another learning rate (both files' checksums right)
  const std::string model =
      rewritten_checkpoint(dir, "run", [](train::RunConfig& r) { r.lr = 0.03; }, /*model_file=*/false);
  const std::string line = refusal_line(cli(resume(model, 6), dir));
  CHECK(contains(line, "optimizer.safetensors"));
  CHECK(contains(line, "'lr' is 0.03 but the model file's is 0.01"));
}

// ---- item 5: non-finite weights are refused on every load ----------------------------------------

TEST_CASE("a checkpoint with a NaN or Inf weight is refused by eval, resume and sample, naming the tensor") {
  TempDir dir;
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    CAPTURE(bad);
    const std::string out = dir / (std::isnan(bad) ? "nan" : "inf"), model = out + "/model.safetensors";
    resaved_tiny_run(dir, out, model, [&](train::LoadedRun& run) {
      for (auto& [name, p] : run.model->named_parameters())
        if (name == "dense.weight") p.data<float>()[5] = static_cast<float>(bad);
    });
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"eval", "--checkpoint", model}, resume(model, 6), {"sample", "--checkpoint", model, "--tokens", "3"}}) {
      CAPTURE(args[0]);
      const std::string line = refusal_line(cli(args, dir));
      CHECK(contains(line, model));
      CHECK(contains(line, fmt::format("'dense.weight' holds {} (element 5)", std::isnan(bad) ? "NaN" : "inf")));
    }
  }
}

// ---- item 8: a resume into another directory reads its source and does not write it ----------

TEST_CASE("a resume into another directory leaves its source as it was, even a save interrupted there") {
  TempDir dir;
  const std::string src = dir / "src", model = src + "/model.safetensors";
  REQUIRE(cli(tiny_run(src, 3), dir).rc == 0);
  // as a save killed after writing the new optimizer state leaves it: the model and the previous
  // optimizer state of step 3, the optimizer state of a later step (4)
  REQUIRE(cli(tiny_run(dir / "later", 4), dir).rc == 0);
  fs::rename(src + "/optimizer.safetensors", src + "/optimizer.prev.safetensors");
  fs::copy_file(dir / "later/optimizer.safetensors", src + "/optimizer.safetensors");
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(src)) before[e.path().filename().string()] = read_file(e.path());
  const auto r = cli({"train", "--resume", model, "--steps", "6", "--out", dir / "dst", "--quiet"}, dir);
  INFO(r.err);
  CHECK(r.rc == 0);
  std::map<std::string, std::string> after;
  for (const auto& e : fs::directory_iterator(src)) after[e.path().filename().string()] = read_file(e.path());
  CHECK(after.size() == before.size());
  for (const auto& [name, bytes] : before) {
    CAPTURE(name);
    REQUIRE(after.count(name));
    CHECK(after.at(name) == bytes);
  }
  CHECK(train::load_model_checkpoint(dir / "dst/model.safetensors").step == 6);
  // a source the run may not write at all: read-only files in a read-only directory, resumed by a
  // user without write permission there (the tests run as root, whom permissions do not stop: the
  // child drops to the user nobody; as another user the child stays who it is)
  {
    const std::string ro = dir / "ro_src", mine = dir / "writable";
    fs::create_directories(ro);
    fs::create_directories(mine);
    for (const auto& [name, bytes] : before) test_support::write_file(ro + "/" + name, bytes);
    for (const auto& [name, bytes] : before) fs::permissions(ro + "/" + name, fs::perms(0444));
    fs::permissions(ro, fs::perms(0555));
    fs::permissions(mine, fs::perms(0777));
    // a copy of the command the user nobody can reach (the build tree may sit in a directory only
    // root may enter, as under mktemp -d)
    const std::string cli_copy = mine + "/headgrad";
    fs::copy_file(HEADGRAD_CLI, cli_copy);
    fs::permissions(cli_copy, fs::perms(0755));
    const pid_t pid = test_support::spawn(
        {cli_copy, "train", "--resume", ro + "/model.safetensors", "--steps", "6", "--out", mine + "/dst", "--quiet"},
        mine + "/ro.out", mine + "/ro.err", mine, {}, [] {
          if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(125);
        });
    const int rc = test_support::wait_for(pid, 120);
    INFO("stderr: ", read_file(mine + "/ro.err"));
    CHECK(rc == 0);
    fs::permissions(ro, fs::perms(0755));
  }
  // resuming in place still settles the interrupted save: the matching state becomes the current one
  CHECK(cli({"train", "--resume", model, "--steps", "5", "--out", src, "--quiet"}, dir).rc == 0);
  CHECK(train::load_model_checkpoint(model).step == 5);
  CHECK_FALSE(fs::exists(src + "/optimizer.prev.safetensors"));
}
