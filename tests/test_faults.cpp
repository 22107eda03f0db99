// Fault injection through the real binary (HEADGRAD_CLI): a `headgrad train` killed with SIGKILL
// at any moment - between checkpoints or in the middle of writing one - never leaves a corrupt
// or partial model.safetensors / optimizer.safetensors, and the temporary files such kills leave
// behind are removed by the next run's saves (io::remove_stale_temp_files). And the fuzz seed
// corpus (tests/fuzz/corpus) replays through the reader in the normal and the sanitizer builds.
//
// The checkpoint is a few MB (d 256, ffn 1024, 2 layers: 6.3 MB model + 12.7 MB optimizer state)
// and is saved after every step (--save-every 1) with a small batch, so a run spends much of its
// time writing checkpoints and a kill often lands inside a save. Half the kills are timed from
// the first checkpoint; the other half wait until a temporary file is seen, i.e. a save is in
// progress, and kill it a few milliseconds in.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "framework/io/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/run_optimizer.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
namespace fs = std::filesystem;
using test_support::read_file;
using test_support::TempDir;

namespace {

using Clock = std::chrono::steady_clock;

// The names in `dir` that contain ".tmp." (temporary checkpoint files).
std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.find(".tmp.") != std::string::npos) out.push_back(n);
  }
  return out;
}

// Starts `headgrad train` writing to `out`, stdout/stderr into files in `logs`.
pid_t spawn_train(const fs::path& out, const fs::path& logs, int i) {
  std::vector<std::string> args = {HEADGRAD_CLI, "train",  "--d-model",    "256", "--ffn",       "1024",
                                   "--layers",   "2",      "--heads",      "4",   "--batch",     "8",
                                   "--steps",    "100000", "--save-every", "1",   "--eval-every", "0",
                                   "--threads",  "1",      "--quiet",      "--out", out.string()};
  return test_support::spawn(args, (logs / fmt::format("run{}.stdout", i)).string(),
                             (logs / fmt::format("run{}.stderr", i)).string());
}

// Polls `done` every millisecond until it holds (true) or `timeout_s` passes, or the child exits
// (false: it should not have).
template <typename F>
bool poll_until(pid_t pid, double timeout_s, F done) {
  const auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < until) {
    if (done()) return true;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

} // namespace

// Label "slow" (ten kills, ~10 s): ./dev.sh test --fast skips it; ./dev.sh test and .ci/run run it.
TEST_CASE("SIGKILL during checkpoint writes never leaves a corrupt checkpoint and stale temporaries get cleaned" *
          doctest::test_suite("slow")) {
  TempDir dir;
  const fs::path out = dir.path / "run";
  const fs::path logs = dir.path / "logs";
  fs::create_directories(out);
  fs::create_directories(logs);
  const fs::path model = out / "model.safetensors", optim = out / "optimizer.safetensors",
                 optim_prev = out / "optimizer.prev.safetensors";

  // A leftover of a long-dead writer before the first run: a pid that was just reaped.
  {
    const pid_t dead = fork();
    REQUIRE(dead >= 0);
    if (dead == 0) _exit(0);
    waitpid(dead, nullptr, 0);
    std::ofstream(out / fmt::format("model.safetensors.tmp.{}.0", dead)) << "half a checkpoint";
  }

  const int kRuns = 10;
  int mid_save_kills = 0, cleaned = 0, optimizer_ahead = 0;
  for (int i = 0; i < kRuns; ++i) {
    CAPTURE(i);
    // Each run starts fresh in the same directory: the final files are removed (so that the
    // run's first checkpoint can be recognised), the previous runs' temporaries are not.
    fs::remove(model);
    fs::remove(optim);
    fs::remove(optim_prev);
    const std::vector<std::string> stale_before = temp_files(out);

    const pid_t pid = spawn_train(out, logs, i);
    const bool first = poll_until(pid, 120, [&] { return fs::exists(model); });
    if (!first) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      FAIL("no first checkpoint within 120 s; stderr: ", read_file(logs / fmt::format("run{}.stderr", i)));
    }
    // The run saved both files once: the earlier runs' temporaries must be gone by now.
    for (const std::string& n : stale_before) {
      CAPTURE(n);
      CHECK_FALSE(fs::exists(out / n));
    }
    cleaned += static_cast<int>(stale_before.size());

    const std::string own_tmp = fmt::format(".tmp.{}.", pid);
    if (i % 2 == 0) {
      // Timed: 0..~400 ms after the first checkpoint, i.e. anywhere in the next steps.
      std::this_thread::sleep_for(std::chrono::milliseconds(45 * i));
    } else {
      // In a save: wait until this run's temporary file appears, then a few ms more.
      const bool in_save = poll_until(pid, 60, [&] {
        for (const std::string& n : temp_files(out))
          if (n.find(own_tmp) != std::string::npos) return true;
        return false;
      });
      CHECK_MESSAGE(in_save, "the run exited or never started a second save");
      std::this_thread::sleep_for(std::chrono::milliseconds(i / 2 * 3)); // 0, 3, 6, 9, 12 ms
    }
    REQUIRE(kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
      FAIL("the run ended before the kill (status ", status,
           "); stderr: ", read_file(logs / fmt::format("run{}.stderr", i)));

    // 1. model.safetensors is a complete checkpoint (load_safetensors checks the size exactly:
    //    a truncated or partly written file cannot pass) that loads as a model.
    REQUIRE(fs::exists(model));
    std::int64_t model_step = -1;
    try {
      train::LoadedRun run = train::load_model_checkpoint(model.string());
      model_step = run.step;
      CHECK(run.config.d_model == 256);
      CHECK(run.config.ffn == 1024);
      CHECK(run.config.layers == 2);
    } catch (const std::exception& e) {
      FAIL("model.safetensors does not load after SIGKILL: ", e.what());
    }
    CHECK(model_step >= 1);
    // 2. The run can be resumed: the optimizer state of the model's step loads - from
    //    optimizer.safetensors, or, when the kill fell between the optimizer and the model write,
    //    from optimizer.prev.safetensors (which is then made the current file again).
    bool ahead = !fs::exists(optim);
    if (!ahead) {
      try {
        ahead = std::stoll(io::load_safetensors(optim.string()).metadata.at("step")) != model_step;
      } catch (const std::exception& e) {
        FAIL("optimizer.safetensors does not load after SIGKILL: ", e.what());
      }
    }
    if (ahead) ++optimizer_ahead;
    try {
      train::LoadedRun run = train::load_model_checkpoint(model.string());
      auto opt = train::make_optimizer(run.config, run.model->named_parameters());
      train::load_optimizer_state(model.string(), run.step, *opt);
      CHECK(std::stoll(io::load_safetensors(optim.string()).metadata.at("step")) == model_step);
    } catch (const std::exception& e) {
      FAIL("the killed run cannot be resumed: ", e.what());
    }
    // 3. What is left besides the final files: at most the one temporary file of the save the
    //    kill interrupted, and it is this run's (earlier runs' ones were removed).
    const std::vector<std::string> left = temp_files(out);
    CHECK(left.size() <= 1);
    for (const std::string& n : left) {
      CAPTURE(n);
      CHECK(n.find(own_tmp) != std::string::npos);
    }
    if (!left.empty()) ++mid_save_kills;
  }
  MESSAGE(kRuns, " runs killed with SIGKILL: ", mid_save_kills, " in the middle of a save (a temporary file was left), ",
          optimizer_ahead, " between the optimizer and the model write (resumed from optimizer.prev); every "
          "killed run could be resumed; ", cleaned, " stale temporaries of earlier runs were removed by the next run");
  // The odd runs killed while a temporary file existed: most of them must have left one behind
  // (a save of ~19 MB takes longer than a few ms). Not all: the save may finish in between.
  CHECK(mid_save_kills >= 1);
}

TEST_CASE("remove_stale_temp_files removes only dead writers' temporaries of that path") {
  TempDir dir;
  const fs::path p = dir.path / "model.safetensors";
  const pid_t dead = fork();
  REQUIRE(dead >= 0);
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::vector<std::string> removed = {fmt::format("model.safetensors.tmp.{}.0", dead),
                                            fmt::format("model.safetensors.tmp.{}.17", dead)};
  const std::vector<std::string> kept = {
      fmt::format("model.safetensors.tmp.{}.0", getpid()),   // this process's own (another thread's save)
      fmt::format("model.safetensors.tmp.{}.0", getppid()),  // a live process's
      fmt::format("optimizer.safetensors.tmp.{}.0", dead),   // another path's
      fmt::format("model.safetensors.tmp.{}", dead),         // not the writer's name shape
      fmt::format("model.safetensors.tmp.{}.0.bak", dead),
      fmt::format("model.safetensors.tmp.-{}.0", dead),
      "model.safetensors.tmp..0",
      "model.safetensors.tmp.x.0",
      "xmodel.safetensors.tmp.1.0"};
  for (const auto& n : removed) std::ofstream(dir.path / n) << "x";
  for (const auto& n : kept) std::ofstream(dir.path / n) << "x";
  CHECK(io::remove_stale_temp_files(p.string()) == removed.size());
  for (const auto& n : removed) {
    CAPTURE(n);
    CHECK_FALSE(fs::exists(dir.path / n));
  }
  for (const auto& n : kept) {
    CAPTURE(n);
    CHECK(fs::exists(dir.path / n));
  }
  // save_safetensors does it too, before writing.
  std::ofstream(dir.path / removed[0]) << "x";
  io::save_safetensors(p.string(), {});
  CHECK_FALSE(fs::exists(dir.path / removed[0]));
  CHECK(fs::exists(p));
  CHECK(io::remove_stale_temp_files((dir.path / "missing_dir" / "m.safetensors").string()) == 0);
}

TEST_CASE("the fuzz seed corpus replays: valid_* files parse, every other file parses or throws invalid_argument") {
  // tests/fuzz/corpus holds the seeds of fuzz_safetensors (written by tests/fuzz/make_corpus.cpp),
  // and is where a finding's input goes once fixed: this replays them all without libFuzzer.
  const fs::path dir = fs::path(HEADGRAD_SOURCE_DIR) / "tests" / "fuzz" / "corpus";
  REQUIRE(fs::is_directory(dir));
  int parsed = 0, refused = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    CAPTURE(name);
    const std::string bytes = read_file(e.path());
    try {
      const io::SafetensorsFile f = io::parse_safetensors(bytes.data(), bytes.size(), name);
      // What parses also writes back to a file that parses the same.
      const std::string again = io::encode_safetensors(f.tensors, f.metadata);
      const io::SafetensorsFile g = io::parse_safetensors(again.data(), again.size(), name + " (re-encoded)");
      CHECK(g.tensors.size() == f.tensors.size());
      CHECK(g.metadata == f.metadata);
      ++parsed;
    } catch (const std::invalid_argument& err) {
      CHECK_MESSAGE(name.rfind("valid_", 0) != 0, "a valid_ seed is refused: ", std::string(err.what()));
      ++refused;
    }
  }
  MESSAGE("corpus: ", parsed, " files parse, ", refused, " are refused");
  CHECK(parsed >= 7);
  CHECK(refused >= 20);
}
