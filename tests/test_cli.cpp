// The `headgrad` binary (HEADGRAD_CLI): --help texts, one-line errors with exit code 2, info,
// train --json, eval, gradcheck, and the flags a resumed run may or may not change.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "train/run/checkpoint.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "tests/svg_check.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
namespace fs = std::filesystem;
using namespace test_support; // contains, lines_of, read_file, refusal_line, TempDir (named after this file)

namespace {

using Result = test_support::CliRun;

// Runs the binary with `args` in `cwd`, capturing stdout, stderr and the exit code.
Result run(const std::vector<std::string>& args, const TempDir& cwd, const test_support::EnvChanges& env = {}) {
  return test_support::run_cli(args, cwd.path, env);
}

// A tiny, fast configuration; flags given later on the command line override these.
std::vector<std::string> tiny(const std::string& out, std::int64_t steps) {
  return {"train", "--task", "copy", "--batch", "16", "--d-model", "16", "--heads", "2", "--layers", "1",
          "--ffn", "32", "--max-len", "8", "--min-len", "2", "--vocab", "10", "--threads", "1",
          "--eval-every", "0", "--steps", std::to_string(steps), "--out", out};
}

// A number after "key": in a one-line JSON object (a minimal parser for our own output).
double json_number(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const auto p = line.find(k);
  REQUIRE_MESSAGE(p != std::string::npos, "no key ", key, " in ", line);
  const char* start = line.c_str() + p + k.size();
  char* end = nullptr;
  const double v = std::strtod(start, &end);
  REQUIRE_MESSAGE(end != start, "key ", key, " is not a number in ", line);
  return v;
}

} // namespace

TEST_CASE("headgrad --help and subcommand --help") {
  TempDir dir;
  const Result r = run({"--help"}, dir);
  CHECK(r.rc == 0);
  CHECK(contains(r.out, "usage: headgrad <command>"));
  for (const char* c : {"train", "eval", "gradcheck", "info"}) CHECK(contains(r.out, fmt::format("\n  {} ", c)));
  CHECK(r.err.empty());
  CHECK(run({"-h"}, dir).rc == 0);

  for (const char* c : {"eval", "gradcheck", "info"}) {
    CAPTURE(c);
    const Result h = run({c, "--help"}, dir);
    CHECK(h.rc == 0);
    CHECK(contains(h.out, fmt::format("usage: headgrad {}", c)));
  }
  const Result e = run({"eval", "--help"}, dir);
  for (const char* f : {"--checkpoint FILE", "--count N", "--examples N", "--threads N"}) CHECK(contains(e.out, f));

  const Result none = run({}, dir);
  CHECK(none.rc == 2);
  CHECK(contains(none.err, "no command given"));
}

TEST_CASE("headgrad train --help lists every flag with its default") {
  TempDir dir;
  const Result r = run({"train", "--help"}, dir);
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(contains(r.out, "usage: headgrad train [flags]"));
  const std::string cores = std::to_string(runtime::available_cores());
  // flag -> default shown ("" = none: an optional path or an on/off switch; "*" = any value: the
  // training schedule defaults are tuned from time to time)
  const std::vector<std::pair<std::string, std::string>> want = {
      {"task", "sort"},         {"steps", "*"},          {"batch", "64"},         {"d-model", "64"},
      {"heads", "4"},           {"layers", "2"},         {"ffn", "128"},          {"max-len", "16"},
      {"min-len", "4"},         {"vocab", "16"},         {"lr", "*"},             {"optimizer", "adam"},
      {"weight-decay", "0"},    {"momentum", "0.9"},     {"warmup", "*"},         {"schedule", "*"},
      {"clip", "1"},            {"dropout", "0"},        {"seed", "0"},           {"attention", "fused"},
      {"beta2", "0.999"},       {"min-lr", "0"},         {"decay", "all"},        {"text", "*"},
      {"data", ""},             {"tokenizer", "chars"},   {"context", "64"},       {"tie-weights", "on"},   {"shards", "0"},         {"precision", "float32"},
      {"threads", cores},       {"eval-every", "*"},     {"eval-count", "1000"},  {"save-every", "0"},
      {"out", ""},              {"resume", ""},          {"graph", ""},           {"overwrite", ""},
      {"reshard", ""},          {"rank-timeout", "300"}, {"json", ""},            {"profile", ""},
      {"quiet", ""},            {"reference", ""}};
  const auto lines = lines_of(r.out);
  std::size_t flag_lines = 0;
  for (const auto& l : lines)
    if (l.rfind("  --", 0) == 0) ++flag_lines;
  CHECK(flag_lines == want.size()); // nothing undocumented, nothing missing
  for (const auto& [flag, def] : want) {
    CAPTURE(flag);
    std::string line;
    for (const auto& l : lines)
      if (l.rfind("  --" + flag + " ", 0) == 0) line = l;
    REQUIRE_FALSE(line.empty());
    if (def == "*") {
      const auto p = line.find("(default: ");
      REQUIRE(p != std::string::npos);
      CHECK(line.size() > p + 11); // a value, then ')'
      CHECK(line.back() == ')');
    } else if (!def.empty()) {
      CHECK(contains(line, "(default: " + def + ")"));
    } else {
      CHECK_FALSE(contains(line, "(default: )"));
    }
  }
  // the output directory's default is described in words
  for (const auto& l : lines)
    if (l.rfind("  --out ", 0) == 0) CHECK(contains(l, "default: runs/<task>-<timestamp>"));
}

TEST_CASE("errors: exactly one line on stderr naming the flag and the rule, exit code 2") {
  TempDir dir;
  std::ofstream(dir / "regular_file") << "not a directory";
  const std::string out = dir / "never";
  struct Case {
    std::vector<std::string> extra; // appended to a valid tiny command line
    std::vector<std::string> want;  // substrings of the one stderr line
  };
  const std::vector<Case> cases = {
      {{"--bogus", "1"}, {"unknown flag --bogus", "headgrad train --help"}},
      {{"--steps"}, {"--steps", "needs a value"}},
      {{"--steps", "abc"}, {"--steps", "must be an integer", "'abc'"}},
      {{"--steps", "99999999999999999999999"}, {"--steps", "must be at most 9223372036854775807"}},
      {{"--steps", "0"}, {"--steps", "must be at least 1", "got 0"}},
      {{"--batch", "0"}, {"--batch", "must be at least 1", "got 0"}},
      {{"--d-model", "-4"}, {"--d-model", "must be at least 1", "got -4"}},
      {{"--d-model", "30", "--heads", "4"}, {"--d-model (30)", "divisible", "--heads (4)"}},
      {{"--min-len", "10", "--max-len", "5"}, {"--min-len (10)", "must not exceed", "--max-len (5)"}},
      {{"--vocab", "1"}, {"--vocab", "must be at least 2", "got 1"}},
      {{"--lr", "fast"}, {"--lr", "must be a finite number", "'fast'"}},
      {{"--lr", "0"}, {"--lr", "must be positive"}},
      {{"--lr", "nan"}, {"--lr", "finite"}},
      {{"--dropout", "1"}, {"--dropout", "[0, 1)"}},
      {{"--momentum", "1.5"}, {"--momentum", "[0, 1)"}},
      {{"--clip", "-1"}, {"--clip", ">= 0"}},
      {{"--schedule", "linear"}, {"--schedule", "constant or cosine", "'linear'"}},
      {{"--json=maybe"}, {"--json", "no value"}},
      {{"stray"}, {"unexpected argument 'stray'"}},
      {{"--out", "/proc/forbidden"}, {"--out /proc/forbidden", "cannot create the directory"}},
      {{"--out", dir / "regular_file/sub"}, {"--out " + dir / "regular_file/sub", "cannot create the directory"}},
      {{"--out", dir / "regular_file"}, {"--out " + dir / "regular_file", "cannot create the directory"}},
      {{"--task", "juggle"}, {"--task", "unknown task 'juggle'", "copy, reverse, sort"}},
      {{"--optimizer", "rmsprop"}, {"--optimizer", "adam, adamw or sgd", "'rmsprop'"}},
      {{"--attention", "flash"}, {"--attention", "fused or composed", "'flash'"}},
      {{"--resume", dir / "missing.safetensors"}, {dir / "missing.safetensors"}},
      {{"--reference", "--threads", "2"}, {"--reference trains on one thread", "--threads 2 conflicts"}},
      {{"--reference", "--attention", "fused"}, {"--reference", "composed attention", "--attention fused conflicts"}},
      {{"--reference", "--shards", "2"}, {"--reference", "one shard", "--shards 2 conflicts"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = tiny(out, 1);
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const Result r = run(args, dir);
    std::string shown;
    for (const auto& a : c.extra) shown += a + " ";
    CAPTURE(shown);
    const std::string line = refusal_line(r);
    CHECK(line.rfind("headgrad train: ", 0) == 0);
    CHECK(line.find("train: train:") == std::string::npos);
    for (const auto& w : c.want) CHECK(contains(line, w));
  }
  CHECK_FALSE(fs::exists(out + "/model.safetensors")); // nothing trained
}

TEST_CASE("errors of the other commands: one line, exit code 2") {
  TempDir dir;
  std::ofstream(dir / "regular_file") << "not a checkpoint";
  SUBCASE("unknown command") {
    const Result r = run({"frobnicate", "--steps", "3"}, dir);
    CHECK(contains(refusal_line(r), "unknown command 'frobnicate'"));
    CHECK(r.out.empty());
  }
  SUBCASE("eval errors") {
    for (const auto& [args, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"eval"}, "--checkpoint FILE is required"},
             {{"eval", "--checkpoint", dir / "none.safetensors"}, dir / "none.safetensors"},
             {{"eval", "--checkpoint", dir / "regular_file"}, dir / "regular_file"},
             {{"eval", "--checkpoint", "x", "--count", "0"}, "--count must be at least 1"},
             {{"eval", "--checkpoint", std::string(HEADGRAD_SOURCE_DIR) + "/tests/reference/fixtures/text_lm_model.safetensors",
               "--svg", dir / "x.svg"},
              "--svg applies to a toy task's checkpoint"},
             {{"gradcheck", "--filter"}, "--filter needs a value"},
             {{"info", "--verbose"}, "unknown flag --verbose"}}) {
      const Result r = run(args, dir);
      CAPTURE(want);
      CHECK(contains(refusal_line(r), want));
    }
  }
}

TEST_CASE("headgrad info prints the BLAS core and threads") {
  TempDir dir;
  const Result r = run({"info"}, dir, {{"OMP_WAIT_POLICY", ""}}); // as started by a user who set no wait policy
  CHECK(r.rc == 0);
  std::map<std::string, std::string> fields;
  for (const auto& l : lines_of(r.out)) {
    const auto colon = l.find(':');
    if (colon == std::string::npos) continue;
    const auto v = l.find_first_not_of(' ', colon + 1);
    fields[l.substr(0, colon)] = v == std::string::npos ? "" : l.substr(v);
  }
  CHECK(fields.count("BLAS core"));
  CHECK_FALSE(fields["BLAS core"].empty());
  CHECK(fields.count("BLAS threads"));
  CHECK(std::atoi(fields["BLAS threads"].c_str()) >= 1);
  CHECK(std::atoi(fields["OpenMP threads"].c_str()) >= 1);
  CHECK(fields["CPU cores"] == std::to_string(runtime::available_cores()));
  // the user set none, so the start-up path chose it
  CHECK(fields["OpenMP waiting"] == "PASSIVE");
  CHECK(fields["CPU model"] == (runtime::cpu_model().empty() ? "(unknown)" : runtime::cpu_model()));
}

TEST_CASE("headgrad info under OMP_PROC_BIND: every place's CPUs, and the binding shown") {
  // libgomp binds the initial thread to the first place as the program starts; the default thread
  // count still counts the cores of every place, or a user who pins OpenMP trains on one core. No
  // OMP_WAIT_POLICY: the start-up path sets it and runs the program again (startup.hpp), which must
  // not start the new one on that first place alone.
  TempDir dir;
  const Result r =
      run({"info"}, dir, {{"OMP_PROC_BIND", "close"}, {"OMP_PLACES", "threads"}, {"OMP_WAIT_POLICY", ""}});
  CHECK(r.rc == 0);
  const std::string cores = std::to_string(runtime::available_cores());
  CHECK(contains(r.out, "CPU cores:       " + cores + "\n"));
  CHECK(contains(r.out, "OpenMP threads:  " + cores + "\n"));
  CHECK(contains(r.out, "OpenMP binding:  close, " + cores + " places\n"));
  const Result unbound = run({"info"}, dir, {{"OMP_PROC_BIND", ""}, {"OMP_PLACES", ""}});
  CHECK(contains(unbound.out, "OpenMP binding:  off\n"));
}

TEST_CASE("train --attention composed and fused: the same run up to rounding") {
  TempDir dir;
  std::vector<double> losses;
  for (const char* path : {"fused", "composed"}) {
    std::vector<std::string> args = tiny(dir / path, 20);
    args.insert(args.end(), {"--attention", path, "--json"});
    const Result r = run(args, dir);
    INFO("stderr: ", r.err);
    REQUIRE(r.rc == 0);
    losses.push_back(json_number(lines_of(r.out).back(), "loss"));
  }
  // the two paths differ in the order of float additions only: after 20 steps the mean loss of
  // the last steps agrees to a few parts in 10^4
  CHECK(std::abs(losses[0] - losses[1]) <= 1e-3 * losses[1]);
}

TEST_CASE("train --profile: the op table, and with two threads each worker's time in its shards") {
  TempDir dir;
  for (const char* threads : {"1", "2"}) {
    CAPTURE(threads);
    std::vector<std::string> args = tiny(dir / threads, 12);
    args[std::find(args.begin(), args.end(), "--threads") - args.begin() + 1] = threads;
    args.insert(args.end(), {"--profile", "--quiet"});
    const Result r = run(args, dir);
    INFO("stdout: ", r.out, "\nstderr: ", r.err);
    REQUIRE(r.rc == 0);
    CHECK(contains(r.out, "total (op time)"));
    CHECK(contains(r.out, "linear_relu"));
    if (std::string(threads) == "1") {
      CHECK_FALSE(contains(r.out, "workers:")); // one thread runs the whole batch: no workers to compare
      continue;
    }
    // "workers: ms per step in their shards A (worker 0), B (worker 1); the fastest waited W ms ..."
    const auto lines = lines_of(r.out);
    const auto w =
        std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("workers: ", 0) == 0; });
    REQUIRE(w != lines.end());
    double a = 0, b = 0, wait = -1;
    REQUIRE(std::sscanf(w->c_str(),
                        "workers: ms per step in their shards %lf (worker 0), %lf (worker 1); the fastest waited %lf",
                        &a, &b, &wait) == 3);
    CHECK(a > 0);
    CHECK(b > 0);
    // the mean of each step's gap is at least the gap of the means (|x| is convex); the three figures
    // are printed to 0.01 ms, so the printed gap may exceed the printed wait by up to 0.015 ms
    CHECK(wait >= std::abs(a - b) - 0.02);
    // then "a step took S ms: the slowest worker's shards and R ms besides", after the line on a
    // slower worker if there was one
    CHECK(std::any_of(w + 1, std::min(w + 3, lines.end()),
                      [](const std::string& l) { return contains(l, "a step took "); }));
  }
}

TEST_CASE("train --json: a JSON summary on the last stdout line, and eval reads the checkpoint") {
  TempDir dir;
  const std::string out = dir / "run";
  std::vector<std::string> args = tiny(out, 30);
  args.push_back("--json");
  const Result r = run(args, dir);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err_lines().empty());
  const auto lines = lines_of(r.out);
  REQUIRE_FALSE(lines.empty());
  const std::string& j = lines.back();
  CHECK(j.front() == '{');
  CHECK(j.back() == '}');
  CHECK(json_number(j, "steps") == 30);
  const double loss = json_number(j, "loss");
  CHECK(loss > 0);
  CHECK(loss < 3.0);
  const double tok = json_number(j, "token_acc"), seq = json_number(j, "seq_acc");
  CHECK(tok >= 0);
  CHECK(tok <= 1);
  CHECK(seq >= 0);
  CHECK(seq <= tok);
  CHECK(json_number(j, "tokens_per_s") > 0);
  CHECK(json_number(j, "seconds") > 0);
  CHECK(contains(j, "\"interrupted\": false"));
  CHECK(contains(j, "\"out\": \"" + out + "\""));
  CHECK(fs::exists(out + "/model.safetensors"));
  CHECK(fs::exists(out + "/metrics.csv"));
  CHECK(fs::exists(out + "/attention.svg"));

  SUBCASE("eval --checkpoint prints held-out accuracy and examples") {
    const Result e = run({"eval", "--checkpoint", out + "/model.safetensors", "--count", "40", "--examples", "3",
                          "--threads", "1"},
                         dir);
    INFO("stdout: ", e.out, "\nstderr: ", e.err);
    CHECK(e.rc == 0);
    CHECK(contains(e.out, "held-out 40 sequences"));
    CHECK(contains(e.out, "token acc"));
    CHECK(contains(e.out, "seq acc"));
    CHECK(contains(e.out, "step 30"));
    std::size_t examples = 0;
    for (const auto& l : lines_of(e.out))
      if (contains(l, "->") && contains(l, "(target ")) ++examples;
    CHECK(examples == 3);
    // the default prints 5 examples
    const Result d = run({"eval", "--checkpoint", out + "/model.safetensors", "--count", "10", "--threads", "1"}, dir);
    std::size_t n = 0;
    for (const auto& l : lines_of(d.out)) n += contains(l, "->");
    CHECK(n == 5);
  }
  SUBCASE("resume: optimizer hyperparameters may change, the model may not") {
    // --lr given on resume is used (and recorded), not silently replaced by the checkpoint's
    const Result r2 = run({"train", "--resume", out + "/model.safetensors", "--steps", "33", "--lr", "0.0005",
                           "--out", out, "--threads", "1", "--quiet"},
                          dir);
    INFO("stderr: ", r2.err);
    CHECK(r2.rc == 0);
    const train::LoadedRun lr = train::load_model_checkpoint(out + "/model.safetensors");
    CHECK(lr.step == 33);
    CHECK(lr.config.lr == 0.0005);
    CHECK(lr.config.d_model == 16);
    // a flag that would change the model or the data is refused, one line
    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
             {"--d-model", "32"}, {"--task", "sort"}, {"--batch", "8"}, {"--dropout", "0.1"}, {"--seed", "5"}}) {
      CAPTURE(flag);
      const Result bad = run({"train", "--resume", out + "/model.safetensors", "--steps", "40", flag, value, "--out",
                              out, "--threads", "1"},
                             dir);
      const std::string line = refusal_line(bad);
      CHECK(contains(line, flag));
      CHECK(contains(line, "differs from the checkpoint"));
    }
    // steps not beyond the checkpoint's
    const Result few = run({"train", "--resume", out + "/model.safetensors", "--steps", "33", "--out", out}, dir);
    CHECK(contains(refusal_line(few), "--steps 33 is not beyond the checkpoint's step 33"));
  }
}

TEST_CASE("eval --svg draws the attention weights of any held-out example") {
  TempDir dir;
  const std::string out = dir / "run";
  REQUIRE(run(tiny(out, 5), dir).rc == 0);
  const std::string ckpt = out + "/model.safetensors";
  const Result r = run({"eval", "--checkpoint", ckpt, "--count", "20", "--examples", "0", "--svg", "ex7.svg",
                        "--example", "7", "--threads", "1"},
                       dir);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "wrote ex7.svg (held-out example 7)"));
  const train::LoadedRun loaded = train::load_model_checkpoint(ckpt);
  const data::Batch set = data::make_eval_set(loaded.config.task_config(), 20);
  const std::int64_t len = set.valid_lens.to_int_vector()[7];
  const std::string svg = read_file(dir / "ex7.svg");
  CHECK(svg_check::well_formed(svg) == "");
  // the title says which tokens are the input, the target and the prediction
  CHECK(contains(svg, "step 5, held-out example 7: input " + data::format_sequence(set.tokens, 7, len) +
                          " (rows: queries, columns: keys), target " + data::format_sequence(set.targets, 7, len) +
                          ", prediction "));
  // one map per layer and head (1 layer, 2 heads), each len x len
  CHECK(test_support::count_of(svg, "<g><title>layer 0 head ") == 2);
  CHECK(test_support::count_of(svg, "</title></rect>") == static_cast<std::size_t>(2 * len * len));
  const Result bad = run({"eval", "--checkpoint", ckpt, "--count", "20", "--svg", "x.svg", "--example", "20"}, dir);
  CHECK(contains(refusal_line(bad), "--example 20 is not below --count 20"));
}

TEST_CASE("one run per output directory: a second run is refused naming the holder - and so is another run's checkpoint") {
  TempDir dir;
  const std::string out = dir / "run";
  SUBCASE("a directory in use") {
    std::vector<std::string> args = tiny(out, 1000000);
    args.insert(args.begin(), HEADGRAD_CLI);
    const pid_t first = test_support::spawn(args, dir / "first.out", dir / "first.err", dir.path.string());
    test_support::wait_for_lines(out + "/metrics.csv", 3);
    const Result second = run(tiny(out, 10), dir);
    CHECK(contains(refusal_line(second), fmt::format("headgrad train: --out {} is in use by another run (pid {} on host ", out, first)));
    kill(first, SIGINT);
    CHECK(test_support::wait_for(first, 60) == 130); // 128 + SIGINT, after saving
    // the lock went with its holder: the run continues there
    const std::int64_t step = train::load_model_checkpoint(out + "/model.safetensors").step;
    CHECK(run({"train", "--resume", out + "/model.safetensors", "--steps", std::to_string(step + 3), "--out", out,
               "--quiet"},
              dir)
              .rc == 0);
  }
  SUBCASE("a finished run: refused, unless --overwrite (or --resume)") {
    REQUIRE(run(tiny(out, 5), dir).rc == 0);
    const std::string model = read_file(out + "/model.safetensors");
    const Result again = run(tiny(out, 3), dir);
    CHECK(contains(refusal_line(again), fmt::format("--out {} holds the checkpoint of another run (step 5); --resume "
                                        "{}/model.safetensors continues it, --overwrite replaces it",
                                        out, out)));
    CHECK(read_file(out + "/model.safetensors") == model); // untouched
    // a --resume of a checkpoint elsewhere may not replace it either
    REQUIRE(run(tiny(dir / "other", 2), dir).rc == 0);
    std::vector<std::string> resume_other = {"train", "--resume", dir / "other/model.safetensors", "--steps", "4", "--out",
                                             out};
    CHECK(run(resume_other, dir).rc == 2);
    // --overwrite: the old run's files go, the new run's come
    std::vector<std::string> overwrite = tiny(out, 3);
    overwrite.push_back("--overwrite");
    CHECK(run(overwrite, dir).rc == 0);
    CHECK(train::load_model_checkpoint(out + "/model.safetensors").step == 3);
    CHECK(lines_of(read_file(out + "/metrics.csv")).size() == 1 + 3 + 1); // header, 3 steps, final eval
  }
}

TEST_CASE("train --reference: one thread, one shard, composed attention; the banner and the summary say so") {
  TempDir dir;
  // the flag, or the environment (HEADGRAD_REFERENCE=1), which info reports; a conflicting flag is
  // refused naming both
  CHECK(contains(run({"info"}, dir, {{"HEADGRAD_REFERENCE", "1"}}).out, "Reference mode:  on (HEADGRAD_REFERENCE=1)"));
  CHECK(contains(run({"info"}, dir).out, "Reference mode:  off"));
  const Result env = run(tiny(dir / "env", 2), dir, {{"HEADGRAD_REFERENCE", "1"}}); // (tiny(): one thread)
  CHECK(env.rc == 0);
  CHECK(contains(env.out, ", reference mode\n"));
  std::vector<std::string> two = tiny(dir / "never", 1);
  two.insert(two.end(), {"--threads", "2"});
  const Result refused = run(two, dir, {{"HEADGRAD_REFERENCE", "1"}});
  CHECK(contains(refusal_line(refused), "reference mode (HEADGRAD_REFERENCE=1) trains on one thread: --threads 2"));
  CHECK_FALSE(fs::exists(dir / "never"));
  // a run: the banner's first line and the summary say which mode ran
  std::vector<std::string> args = tiny(dir / "ref", 3);
  args.erase(std::find(args.begin(), args.end(), "--threads"), std::find(args.begin(), args.end(), "--threads") + 2);
  args.push_back("--reference"); // and no --threads: one thread, not the cores
  const Result r = run(args, dir);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() > 2);
  CHECK(lines[0] == "headgrad train: reference mode (every kernel its plain loop, one thread, composed attention)");
  CHECK(contains(r.out, ", 1 threads;"));
  CHECK(test_support::count_of(r.out, ", reference mode\n") == 1); // the "done:" line
  args.push_back("--json");
  args.push_back("--overwrite");
  const Result j = run(args, dir);
  REQUIRE(j.rc == 0);
  CHECK(contains(lines_of(j.out).back(), "\"threads\": 1, \"shards\": 1, \"reference\": true"));
  // (the trainer refuses reference mode with the fused attention: these runs had the composed one)
  // without it: not
  const Result fast = run(tiny(dir / "fast", 3), dir);
  REQUIRE(fast.rc == 0);
  CHECK_FALSE(contains(fast.out, "reference mode"));
}

TEST_CASE("gradcheck --reference: the book's loops pass the rows too, and say so") {
  TempDir dir;
  const Result r = run({"gradcheck", "--reference", "--filter", "matmul"}, dir);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  CHECK(r.rc == 0);
  CHECK(lines_of(r.out).front() == "reference mode: every kernel runs its plain loop, on one thread");
  CHECK(contains(r.out, " passed, 0 failed"));
  CHECK_FALSE(contains(r.out, "0 cases"));
}

TEST_CASE("gradcheck --filter matmul passes and prints PASS rows") {
  TempDir dir;
  const Result r = run({"gradcheck", "--filter", "matmul"}, dir);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  CHECK(r.rc == 0);
  std::size_t pass = 0;
  for (const auto& l : lines_of(r.out)) {
    if (!contains(l, "PASS") && !contains(l, "FAIL")) continue;
    CHECK(contains(l, "matmul"));
    CHECK(contains(l, "PASS"));
    ++pass;
  }
  CHECK(pass >= 3);
  CHECK(contains(r.out, fmt::format("{} cases, {} passed, 0 failed", pass, pass)));
  // a filter matching nothing runs nothing and succeeds
  const Result none = run({"gradcheck", "--filter", "no-such-op"}, dir);
  CHECK(none.rc == 0);
  CHECK(contains(none.out, "0 cases, 0 passed, 0 failed"));
}

// ---- the BLAS kernel every program chooses at start-up (framework/engine/runtime/startup.hpp) --------

TEST_CASE("preferred_core: a fallback core is replaced by the CPU's best kernel, nothing else is") {
  runtime::CpuFeatures avx2{true, true, true, true, false, false, false, false};
  runtime::CpuFeatures avx512{true, true, true, true, true, true, true, true};
  runtime::CpuFeatures sse3{true, false, false, false, false, false, false, false};
  CHECK(runtime::preferred_core("Prescott", avx512) == "SkylakeX");
  CHECK(runtime::preferred_core("Prescott", avx2) == "Haswell");
  CHECK(runtime::preferred_core("Nehalem", avx2) == "Haswell");
  CHECK(runtime::preferred_core("Sandybridge", avx2) == "Haswell");
  CHECK(runtime::preferred_core("Prescott", sse3) == ""); // nothing better to choose
  for (const char* good : {"Haswell", "Zen", "SkylakeX", "Cooperlake"}) {
    CAPTURE(good);
    CHECK(runtime::preferred_core(good, avx512) == "");
  }
}

TEST_CASE("wider_core: the kernel `headgrad info` suggests over the user's narrower choice") {
  runtime::CpuFeatures avx2{true, true, true, true, false, false, false, false};
  runtime::CpuFeatures avx512{true, true, true, true, true, true, true, true};
  CHECK(runtime::wider_core("Haswell", avx512) == "SkylakeX"); // AVX2 kernels on an AVX-512 CPU
  CHECK(runtime::wider_core("Zen", avx512) == "SkylakeX");
  CHECK(runtime::wider_core("Prescott", avx512) == "SkylakeX"); // a fallback: as preferred_core
  CHECK(runtime::wider_core("Prescott", avx2) == "Haswell");
  CHECK(runtime::wider_core("Haswell", avx2) == ""); // the CPU's widest already
  CHECK(runtime::wider_core("SkylakeX", avx512) == "");
  CHECK(runtime::wider_core("Cooperlake", avx512) == "");
}

namespace {
// The BLAS-related variables cleared, so each case starts from a user who set nothing.
std::vector<std::pair<std::string, std::string>> clean_blas_env() {
  return {{"OPENBLAS_CORETYPE", ""}, {"HEADGRAD_REEXECED", ""}, {"HEADGRAD_BLAS_AUTOCORE", ""},
          {"HEADGRAD_BLAS_AUTOCORE_FROM", ""}, {"HEADGRAD_BLAS_AUTOCORE_ASSUME", ""}};
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string info_field(const std::string& out, const std::string& name) {
  for (const auto& l : lines_of(out))
    if (l.rfind(name + ":", 0) == 0) {
      const auto v = l.find_first_not_of(' ', name.size() + 1);
      return v == std::string::npos ? "" : l.substr(v);
    }
  return "";
}
// The kernel runtime::configure() puts in place of a Prescott fallback on this CPU; "" if there is
// none, which the test's output then says.
std::string better_than_prescott() {
  const std::string core = runtime::preferred_core("Prescott", runtime::cpu_features());
  if (core.empty()) MESSAGE("this CPU has neither AVX2+FMA nor AVX-512: there is no better kernel to choose");
  return core;
}
} // namespace

TEST_CASE("a fallback BLAS core is replaced at start-up, said in one line, and the chosen kernel computes gemm right") {
  const std::string want = better_than_prescott();
  if (want.empty()) return;
  TempDir dir;
  // OpenBLAS picks a proper kernel on this machine by itself, so the runtime is told to decide as
  // if it had fallen back to Prescott (HEADGRAD_BLAS_AUTOCORE_ASSUME, a test hook) - once deciding
  // only, once running Prescott for real as well (test_support::simulated_blas_fallback).
  auto decide_only = clean_blas_env();
  decide_only.emplace_back("HEADGRAD_BLAS_AUTOCORE_ASSUME", "Prescott");
  for (const auto& env : {decide_only, test_support::simulated_blas_fallback()}) {
    const Result r = run({"info", "--check-blas", "60"}, dir, env);
    INFO("stdout: ", r.out, "\nstderr: ", r.err);
    CHECK(r.rc == 0);
    CHECK(info_field(r.out, "BLAS core") == fmt::format("{} (OPENBLAS_CORETYPE={}, chosen by headgrad)", want, want));
    CHECK(has(r.out, fmt::format("headgrad: note: OpenBLAS fell back to its Prescott kernel on this CPU; using {} instead",
                                 want)));
    CHECK(info_field(r.out, "BLAS check").find(": ok (worst error") != std::string::npos);
  }
}

TEST_CASE("on a CPU where OpenBLAS falls back: train's one error line and its start-up note") {
  TempDir dir;
  const Result r = run({"train", "--steps", "0", "--out", dir / "a"}, dir,
                       test_support::simulated_blas_fallback());
  INFO("stderr: ", r.err);
  CHECK(r.rc == 2);
  const auto errors = r.err_lines();
  REQUIRE(errors.size() == 1);
  CHECK(contains(errors[0], "headgrad train: --steps"));
  for (const auto& l : lines_of(r.err))
    if (test_support::is_note(l)) CHECK(contains(l, "OpenBLAS fell back to its Prescott kernel"));
}

TEST_CASE("a kernel the user chose is never overridden, and the fallback kernel is correct too") {
  TempDir dir;
  auto env = clean_blas_env();
  env.emplace_back("OPENBLAS_CORETYPE", "Prescott");
  env.emplace_back("HEADGRAD_BLAS_AUTOCORE_ASSUME", "Nehalem"); // a fallback is simulated, but the user chose
  const Result r = run({"info", "--check-blas", "60"}, dir, env);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  CHECK(r.rc == 0);
  CHECK(info_field(r.out, "BLAS core") == "Prescott (OPENBLAS_CORETYPE=Prescott, set by you)");
  CHECK_FALSE(has(r.out + r.err, "fell back"));
  // ... but info says which wider kernel the CPU would run, if it has one
  const std::string wider = runtime::wider_core("Prescott", runtime::cpu_features());
  if (wider.empty()) CHECK(info_field(r.out, "BLAS hint") == "");
  else CHECK(has(info_field(r.out, "BLAS hint"), fmt::format("wider {} kernel; OPENBLAS_CORETYPE=Prescott", wider)));
  CHECK(info_field(r.out, "BLAS check").find(": ok (worst error") != std::string::npos);
}

TEST_CASE("HEADGRAD_BLAS_AUTOCORE=0 keeps the fallback; with nothing set the natural kernel checks out") {
  TempDir dir;
  auto env = clean_blas_env();
  env.emplace_back("HEADGRAD_BLAS_AUTOCORE_ASSUME", "Prescott");
  env.emplace_back("HEADGRAD_BLAS_AUTOCORE", "0");
  const Result off = run({"info"}, dir, env);
  CHECK(off.rc == 0);
  CHECK(info_field(off.out, "BLAS core").find("chosen by headgrad") == std::string::npos);
  const Result natural = run({"info", "--check-blas", "60"}, dir, clean_blas_env());
  INFO("stdout: ", natural.out);
  CHECK(natural.rc == 0);
  CHECK(info_field(natural.out, "BLAS check").find(": ok (worst error") != std::string::npos);
}

TEST_CASE("flags that do not apply to the task are refused, not ignored") {
  TempDir dir;
  for (const auto& [args, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"train", "--task", "sort", "--text", "book.txt"}, "--text applies to --task text only; this run's task is sort"},
           {{"train", "--tokenizer", "bytes"}, "--tokenizer applies to --task text only; this run's task is sort"},
           {{"train", "--task", "copy", "--context", "32"}, "--context applies to --task text and --task tokens only"},
           {{"train", "--task", "reverse", "--tie-weights", "off"}, "--tie-weights applies to --task text and --task tokens only"},
           {{"train", "--task", "text", "--vocab", "30"}, "--vocab does not apply to --task text (its vocabulary is the text's"},
           {{"train", "--task", "text", "--max-len", "30"}, "--max-len does not apply to --task text (its sequence length is --context)"},
           {{"train", "--task", "text", "--min-len", "3"}, "--min-len does not apply to --task text"},
           {{"train", "--task", "tokens", "--data", "dir", "--text", "book.txt"}, "--text applies to --task text only; this run's task is tokens"},
           {{"train", "--task", "tokens", "--data", "dir", "--tokenizer", "bytes"}, "--tokenizer applies to --task text only; this run's task is tokens"},
           {{"train", "--task", "text", "--data", "dir"}, "--data applies to --task tokens only; this run's task is text"},
           {{"train", "--task", "sort", "--data", "dir"}, "--data applies to --task tokens only; this run's task is sort"},
           {{"train", "--task", "tokens", "--data", "dir", "--vocab", "30"}, "--vocab does not apply to --task tokens (its vocabulary is the token files'"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--steps", "1", "--out", dir / "never"});
    const Result r = run(a, dir);
    CAPTURE(want);
    CHECK(contains(refusal_line(r), "headgrad train: " + want));
  }
  CHECK_FALSE(fs::exists(dir / "never"));
}

TEST_CASE("the hints a run prints are shell-quoted: a path with spaces and quotes copies into a shell") {
  TempDir dir;
  const std::string out = dir / "my run's dir";
  const Result r = run({"train", "--task", "text", "--steps", "2", "--batch", "2", "--layers", "1", "--d-model", "16",
                        "--heads", "2", "--ffn", "32", "--context", "16", "--eval-count", "1", "--threads", "1", "--out",
                        out},
                       dir);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  const std::string key = "sample with: headgrad sample --checkpoint ";
  const auto at = r.out.find(key);
  REQUIRE(at != std::string::npos);
  const std::string word = r.out.substr(at + key.size(), r.out.find('\n', at) - at - key.size());
  // what a POSIX shell makes of the printed word: the path, one argument
  const std::string script = dir / "args.sh";
  std::ofstream(script) << "printf '%s\\n' " << word << " > " << (dir / "args.txt") << "\n";
  REQUIRE(std::system(("/bin/sh " + script).c_str()) == 0);
  CHECK(read_file(dir / "args.txt") == out + "/model.safetensors\n");
}

// Every test program starts through tests/main.cpp, which calls runtime::configure() as the
// headgrad command does: results a test compares with the command's come from the same kernel.
TEST_CASE("this test program took the start-up path: its BLAS kernel is no fallback this CPU can beat") {
  CHECK(runtime::configured());
  const std::string core = runtime::blas_info().core;
  fmt::print("test program BLAS kernel: {}\n", core);
  if (!runtime::user_chose_core()) CHECK(runtime::preferred_core(runtime::active_core(), runtime::cpu_features()) == "");
}

TEST_CASE("a test program on a CPU where OpenBLAS falls back runs this CPU's kernel, as the command does") {
  const std::string want = better_than_prescott();
  if (want.empty()) return;
  TempDir dir;
  // this very program, running only the case above
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string out = dir / "self.out", err = dir / "self.err";
  const int rc = test_support::wait_for(
      test_support::spawn({self, "--test-case=this test program took the start-up path*"}, out, err, dir.path.string(),
                          test_support::simulated_blas_fallback()));
  INFO("stdout: ", read_file(out), "\nstderr: ", read_file(err));
  CHECK(rc == 0);
  CHECK(contains(read_file(out), fmt::format("test program BLAS kernel: {}\n", want)));
  CHECK(contains(read_file(out), "test cases: 1 | 1 passed"));
  CHECK_FALSE(contains(read_file(err), "headgrad: note:")); // it was configured: nothing to tell
}

namespace {
// startup_probe (tests/startup_probe.cpp) under env: how many times it started (each start
// appends a line), and its stdout and stderr.
struct ProbeRun {
  std::size_t starts;
  std::string out, err;
};
ProbeRun run_startup_probe(const TempDir& dir, const test_support::EnvChanges& env, const std::string& mode = "") {
  const std::string log = dir / "starts.txt", out = dir / "probe.out", err = dir / "probe.err";
  fs::remove(log);
  std::vector<std::string> args{HEADGRAD_STARTUP_PROBE, log};
  if (!mode.empty()) args.push_back(mode);
  const int rc = test_support::wait_for(test_support::spawn(args, out, err, dir.path.string(), env));
  CHECK(rc == 0);
  return {lines_of(read_file(log)).size(), read_file(out), read_file(err)};
}
} // namespace

TEST_CASE("runtime::configure re-executes only where a setting matters, and not at all when told not to") {
  TempDir dir;
  auto quiet = clean_blas_env();
  quiet.emplace_back("HEADGRAD_BLAS_AUTOCORE", "0"); // OpenBLAS's own kernel stands: nothing to change there
  quiet.emplace_back("OMP_WAIT_POLICY", "");
  SUBCASE("one OpenMP thread: the wait policy changes nothing, so the program runs once") {
    quiet.emplace_back("OMP_NUM_THREADS", "1");
    const ProbeRun r = run_startup_probe(dir, quiet);
    INFO("stdout: ", r.out, "\nstderr: ", r.err);
    CHECK(r.starts == 1);
    CHECK(r.out == "before configure\nafter configure: OMP_WAIT_POLICY=\n");
    CHECK(r.err == "");
  }
  SUBCASE("two OpenMP threads: PASSIVE, applied by one re-execution (the code before configure ran twice)") {
    quiet.emplace_back("OMP_NUM_THREADS", "2");
    const ProbeRun r = run_startup_probe(dir, quiet);
    CHECK(r.starts == 2);
    CHECK(contains(r.out, "after configure: OMP_WAIT_POLICY=PASSIVE\n"));
  }
  SUBCASE("reexec = false (or HEADGRAD_REEXEC=0): one start, nothing changed, one line saying what it costs") {
    auto fallback = test_support::simulated_blas_fallback();
    fallback.emplace_back("OMP_NUM_THREADS", "2");
    const std::string want = runtime::preferred_core("Prescott", runtime::cpu_features());
    for (const bool by_env : {false, true}) {
      CAPTURE(by_env);
      auto env = fallback;
      if (by_env) env.emplace_back("HEADGRAD_REEXEC", "0");
      const ProbeRun r = run_startup_probe(dir, env, by_env ? "" : "no-reexec");
      INFO("stdout: ", r.out, "\nstderr: ", r.err);
      CHECK(r.starts == 1);
      CHECK(contains(r.out, "after configure: OMP_WAIT_POLICY=\n"));
      REQUIRE(lines_of(r.err).size() == 1);
      CHECK(contains(r.err, "headgrad: note: runtime::configure without re-executing: "));
      CHECK(contains(r.err, "idle OpenMP threads spin on their cores"));
      if (!want.empty()) CHECK(contains(r.err, fmt::format("generic Prescott kernel (about")));
    }
  }
}
