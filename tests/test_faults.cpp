// Fault injection through the real binary (HEADGRAD_CLI): a `headgrad train` killed with SIGKILL
// at any moment - between checkpoints or in the middle of writing one - never leaves a corrupt
// or partial model.safetensors / optimizer.safetensors, and the temporary files such kills leave
// behind are removed by the next run's saves (io::remove_stale_temp_files). And the fuzz seed
// corpus (tests/fuzz/corpus) replays through the reader in the normal and the sanitizer builds.
//
// Then what a run meets in its output directory and from the outside: links and special files
// where it writes or reads (refused, their targets untouched; every link and FIFO is made inside
// the test's own scratch directory), a user's file where its log would go, signals during
// start-up and SIGHUP, a SIGKILL's effect on metrics.csv, an optimizer state of another step.
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
#include <pty.h>
#include <string>
#include <sys/stat.h>
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
using test_support::read_file;
using test_support::refusal_line;
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
                                   "--threads",  "1",      "--quiet",      "--out", out.string(),
                                   "--overwrite"}; // the killed run's metrics.csv is there, without a checkpoint
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
    //    from optimizer.prev.safetensors (which a run resuming in this directory then makes the
    //    current file again: settle_interrupted_save).
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
      train::settle_interrupted_save(model.string(), run.step);
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

// ---- the output directory: links, special files, files the run did not write --------------------

namespace {

using test_support::contains;
using test_support::lines_of;

using test_support::cli;
using test_support::step_rows;
using test_support::tiny_run;

} // namespace

TEST_CASE("a symbolic link where a run writes is refused, and its target is untouched") {
  TempDir dir;
  const std::string victim = dir / "victim.txt";
  for (const char* name : {"run.lock", "metrics.csv", "curves.svg", "attention.svg", "model.safetensors"}) {
    CAPTURE(name);
    test_support::write_file(victim, "precious\n");
    const std::string out = dir / fmt::format("out_{}", name);
    fs::create_directories(out);
    fs::create_symlink(victim, out + "/" + name);
    const std::string line = refusal_line(cli(tiny_run(out, 2), dir));
    CHECK(contains(line, fmt::format("--out {}: {} is a symbolic link (to {})", out, name, victim)));
    CHECK(read_file(victim) == "precious\n");
    CHECK_FALSE(fs::exists(out + "/optimizer.safetensors"));
  }
  // a resumed run's own log turned into a link: refused as well (appending would follow it)
  const std::string out = dir / "resumed";
  REQUIRE(cli(tiny_run(out, 3), dir).rc == 0);
  fs::rename(out + "/metrics.csv", dir / "moved.csv");
  fs::create_symlink(dir / "moved.csv", out + "/metrics.csv");
  const std::string moved = read_file(dir / "moved.csv");
  const std::string line =
      refusal_line(cli({"train", "--resume", out + "/model.safetensors", "--steps", "5", "--out", out, "--quiet"}, dir));
  CHECK(contains(line, "metrics.csv is a symbolic link"));
  CHECK(read_file(dir / "moved.csv") == moved);
}

TEST_CASE("a FIFO or a directory where a run writes or reads is refused instead of hanging") {
  TempDir dir;
  const std::string fifo = dir / "pipe";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // read: --checkpoint, --resume, --text, plot's log (each would wait for a writer forever)
  for (const auto& [args, part] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"eval", "--checkpoint", fifo}, "is a FIFO (named pipe), not a regular file"},
           {{"sample", "--checkpoint", fifo}, "is a FIFO (named pipe), not a regular file"},
           {{"train", "--resume", fifo, "--steps", "9", "--out", dir / "r"}, "is a FIFO (named pipe), not a regular file"},
           {{"train", "--task", "text", "--text", fifo, "--steps", "1", "--out", dir / "t"},
            "--text " + fifo + ": is a FIFO (named pipe), not a regular file"},
           {{"plot", fifo, "--out", dir / "p.svg"}, "is a FIFO (named pipe), not a regular file"}}) {
    CAPTURE(args[0]);
    const pid_t pid = test_support::spawn(
        [&] {
          std::vector<std::string> all = {HEADGRAD_CLI};
          all.insert(all.end(), args.begin(), args.end());
          return all;
        }(),
        dir / "fifo.out", dir / "fifo.err", dir.path.string());
    CHECK(test_support::wait_for(pid, 30) == 2); // a hang fails here after 30 s
    CHECK(contains(read_file(dir / "fifo.err"), part));
  }
  // write: a FIFO or a directory under one of a run's names in --out
  const std::string out = dir / "out";
  fs::create_directories(out + "/curves.svg");
  CHECK(contains(refusal_line(cli(tiny_run(out, 2), dir)), "curves.svg is a directory, not a regular file"));
  fs::remove(out + "/curves.svg");
  REQUIRE(mkfifo((out + "/metrics.csv").c_str(), 0600) == 0);
  CHECK(contains(refusal_line(cli(tiny_run(out, 2), dir)), "metrics.csv is a FIFO (named pipe), not a regular file"));
}

TEST_CASE("a metrics.csv the run did not write is not replaced without --overwrite") {
  TempDir dir;
  const std::string out = dir / "run";
  fs::create_directories(out);
  test_support::write_file(out + "/metrics.csv", "my own numbers\n");
  const std::string line = refusal_line(cli(tiny_run(out, 2), dir));
  CHECK(contains(line, fmt::format("--out {} holds metrics.csv but no checkpoint", out)));
  CHECK(contains(line, "--overwrite replaces them"));
  CHECK(read_file(out + "/metrics.csv") == "my own numbers\n");
  // so are pictures without a checkpoint
  fs::remove(out + "/metrics.csv");
  test_support::write_file(out + "/curves.svg", "<svg/>");
  CHECK(contains(refusal_line(cli(tiny_run(out, 2), dir)), "holds curves.svg but no checkpoint"));
  // --overwrite replaces them
  REQUIRE(cli(tiny_run(out, 2, {"--overwrite"}), dir).rc == 0);
  CHECK(step_rows(read_file(out + "/metrics.csv")) == std::vector<std::int64_t>{1, 2});
  // a log that is nothing but its header (a run stopped before its first step) is no one's data
  const std::string empty = dir / "empty";
  fs::create_directories(empty);
  test_support::write_file(empty + "/metrics.csv", "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n");
  CHECK(cli(tiny_run(empty, 2), dir).rc == 0);
}

TEST_CASE("metrics.csv after SIGKILL holds every step up to the checkpoint, and a resumed run logs each step once") {
  TempDir dir;
  const std::string out = dir / "run";
  std::vector<std::string> args = {HEADGRAD_CLI};
  for (const auto& a : tiny_run(out, 1000000, {"--save-every", "7", "--quiet"})) args.push_back(a);
  const pid_t pid = test_support::spawn(args, dir / "k.out", dir / "k.err", dir.path.string());
  const fs::path model = fs::path(out) / "model.safetensors";
  // kill it once a checkpoint of step >= 14 is on disk (rows 1..14 are far from a 50-step flush)
  const auto until = Clock::now() + std::chrono::seconds(60);
  std::int64_t step = 0;
  while (Clock::now() < until) {
    try {
      if (fs::exists(model)) step = train::load_model_checkpoint(model.string()).step;
    } catch (const std::exception&) {
    }
    if (step >= 14) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(kill(pid, SIGKILL) == 0);
  waitpid(pid, nullptr, 0);
  REQUIRE(step >= 14);
  const std::int64_t saved = train::load_model_checkpoint(model.string()).step; // may be later than `step`
  std::vector<std::int64_t> rows = step_rows(read_file(out + "/metrics.csv"));
  CAPTURE(saved);
  REQUIRE(static_cast<std::int64_t>(rows.size()) >= saved); // every step of the checkpoint is logged
  for (std::int64_t s = 1; s <= saved; ++s) CHECK(rows[static_cast<std::size_t>(s - 1)] == s);
  // the killed run may have logged steps after its checkpoint; pretend it logged more, cut short
  {
    std::ofstream f(out + "/metrics.csv", std::ios::app);
    f << saved + 1 << ",1.0,0.01,100.0,,,\n" << saved + 2 << ",1.0,0.01,100.0,,,\n" << saved + 3 << ",1.0";
  }
  const auto r = cli({"train", "--resume", model.string(), "--steps", std::to_string(saved + 10), "--out", out,
                      "--quiet"},
                     dir);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  rows = step_rows(read_file(out + "/metrics.csv"));
  REQUIRE(static_cast<std::int64_t>(rows.size()) == saved + 10); // each step once
  for (std::int64_t s = 1; s <= saved + 10; ++s) CHECK(rows[static_cast<std::size_t>(s - 1)] == s);
}

TEST_CASE("Ctrl-C during start-up stops the run before its first step, exit 130; SIGTERM and SIGHUP save and exit 143, 129") {
  TempDir dir;
  // a corpus that takes a moment to read: the signal comes while the run starts up
  std::string text;
  const std::string line = "a line of text that is read before the first step, again and again.\n";
  while (text.size() < (24u << 20)) text += line;
  test_support::write_file(dir / "big.txt", text);
  const std::string out = dir / "startup";
  std::vector<std::string> args = {HEADGRAD_CLI, "train", "--task", "text", "--text", dir / "big.txt", "--steps", "300",
                                   "--batch", "2", "--layers", "1", "--d-model", "16", "--heads", "2", "--ffn", "32",
                                   "--context", "16", "--threads", "1", "--out", out};
  const pid_t pid = test_support::spawn(args, dir / "s.out", dir / "s.err", dir.path.string());
  // the banner is printed before the corpus is read
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (!contains(read_file(dir / "s.out"), "BLAS:") && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(kill(pid, SIGINT) == 0);
  const int rc = test_support::wait_for(pid, 60);
  INFO("stdout: ", read_file(dir / "s.out"), "\nstderr: ", read_file(dir / "s.err"));
  CHECK(rc == 130);
  CHECK(contains(read_file(dir / "s.out"), "interrupted while starting up, before step 1: nothing trained"));
  CHECK_FALSE(fs::exists(out + "/model.safetensors"));

  // mid-run: SIGTERM and SIGHUP (a closed terminal) save a checkpoint and exit 128 + the signal
  for (const auto& [sig, code] : std::vector<std::pair<int, int>>{{SIGTERM, 143}, {SIGHUP, 129}, {SIGINT, 130}}) {
    CAPTURE(sig);
    const std::string o = dir / fmt::format("mid{}", sig);
    std::vector<std::string> a = {HEADGRAD_CLI};
    for (const auto& x : tiny_run(o, 1000000)) a.push_back(x);
    const pid_t p = test_support::spawn(a, dir / "m.out", dir / "m.err", dir.path.string());
    test_support::wait_for_lines(o + "/metrics.csv", 3); // 50 steps flushed
    REQUIRE(kill(p, sig) == 0);
    CHECK(test_support::wait_for(p, 60) == code);
    const std::string printed = read_file(dir / "m.out");
    CHECK(contains(printed, "interrupted at step "));
    const train::LoadedRun run = train::load_model_checkpoint(o + "/model.safetensors");
    CHECK(contains(printed, fmt::format("interrupted at step {}:", run.step)));
    CHECK(step_rows(read_file(o + "/metrics.csv")).size() == static_cast<std::size_t>(run.step));
  }
}

TEST_CASE("--resume refuses an optimizer state whose step is not the checkpoint's") {
  TempDir dir;
  const std::string out = dir / "run";
  REQUIRE(cli(tiny_run(out, 6), dir).rc == 0);
  const std::string opt = out + "/optimizer.safetensors";
  const io::SafetensorsFile f = io::load_safetensors(opt);
  for (const std::int64_t bad : {std::int64_t{3}, std::int64_t{2'100'000'000}}) {
    CAPTURE(bad);
    io::NamedTensors ts = f.tensors;
    for (auto& [name, t] : ts)
      if (name == "step") t = Tensor::from_ints({bad}, {});
    io::save_safetensors(opt, ts, f.metadata);
    const std::string line =
        refusal_line(cli({"train", "--resume", out + "/model.safetensors", "--steps", "9", "--out", out, "--quiet"}, dir));
    CHECK(contains(line, fmt::format("{}: optimizer state 'step' is {} but the checkpoint is from step 6", opt, bad)));
  }
  io::save_safetensors(opt, f.tensors, f.metadata); // the file as it was: resumes
  CHECK(cli({"train", "--resume", out + "/model.safetensors", "--steps", "9", "--out", out, "--quiet"}, dir).rc == 0);
}

TEST_CASE("a bit flipped in a checkpoint's tensor data is refused by the tensor's name") {
  TempDir dir;
  const std::string out = dir / "run";
  REQUIRE(cli(tiny_run(out, 2), dir).rc == 0);
  const std::string model = out + "/model.safetensors";
  std::string bytes = read_file(model);
  bytes[bytes.size() - 3] ^= 0x10; // in the last tensor's data (dense.bias)
  test_support::write_file(model, bytes);
  const std::string line = refusal_line(cli({"eval", "--checkpoint", model}, dir));
  CHECK(contains(line, "tensor \"dense.bias\" fails its checksum"));
  CHECK(contains(line, "the file is corrupt"));
}

TEST_CASE("SIGHUP after the terminal went away: the run still saves and exits 129") {
  // the run's stdout is a terminal (a pseudo-terminal made here) whose other end is then closed,
  // as when a terminal window is closed: every later write fails with EIO
  TempDir dir;
  int master = -1, slave = -1;
  REQUIRE(openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  const std::string out = dir / "run";
  std::vector<std::string> args = {HEADGRAD_CLI};
  for (const auto& a : tiny_run(out, 1000000)) args.push_back(a);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(slave, 1);
    dup2(slave, 2);
    close(master);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    execv(cargs[0], cargs.data());
    _exit(127);
  }
  close(slave);
  // drain what it prints until it has trained a while, then hang up
  const auto until = Clock::now() + std::chrono::seconds(60);
  char buf[4096];
  fcntl(master, F_SETFL, O_NONBLOCK);
  while (lines_of(read_file(out + "/metrics.csv")).size() < 3 && Clock::now() < until) {
    while (read(master, buf, sizeof buf) > 0) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  close(master);
  REQUIRE(kill(pid, SIGHUP) == 0);
  CHECK(test_support::wait_for(pid, 60) == 129);
  const train::LoadedRun run = train::load_model_checkpoint(out + "/model.safetensors");
  CHECK(run.step >= 50);
  CHECK(step_rows(read_file(out + "/metrics.csv")).size() == static_cast<std::size_t>(run.step));
}
