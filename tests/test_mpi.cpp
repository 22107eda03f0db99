// Data-parallel training over MPI ranks, through the real binaries under mpirun (Open MPI, this
// machine only): `headgrad train` on 2 ranks against one process, uneven and empty shards, ranks
// x threads, resuming across rank counts, a rank killed mid-run, Ctrl-C on mpirun, refusals before
// training, and - through tests/mpi/rank_program.cpp, which writes what every rank holds - bitwise
// identical ranks, the wrapper for a user's own module, and drift detection.
//
// Built only when CMake found MPI; then these tests fail (not skip) when mpirun does. Label "mpi".
// Every run is the small model or smaller, for a few dozen steps: the file takes tens of seconds.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <string>
#include <vector>

#include "framework/io/safetensors.hpp"
#include "tests/mpi/user_module.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "tests/test_support.hpp"
#include "train/run/checkpoint.hpp"
#include "train/run/run_optimizer.hpp"

using namespace headgrad;
namespace fs = std::filesystem;
using test_support::check_close;
using test_support::contains;
using test_support::lines_of;
using test_support::read_file;

namespace {

using test_support::TempDir; // named after this file

struct Result {
  int rc = -1;
  std::string out, err;
  // headgrad's own error lines: mpirun adds banners of its own around a failed job, and an
  // informational note (test_support::is_note) may come first
  std::vector<std::string> headgrad_lines() const {
    std::vector<std::string> v;
    for (const auto& l : lines_of(err))
      if (l.rfind("headgrad", 0) == 0 && !test_support::is_note(l)) v.push_back(l);
    return v;
  }
};

// mpirun as a test runs it: CI runs as root, which Open MPI refuses unless told; the ranks may
// outnumber the cores; no binding of ranks to cores (ctest runs other tests beside them).
test_support::EnvChanges mpi_env() {
  test_support::EnvChanges env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
#if defined(__SANITIZE_ADDRESS__)
  // Open MPI unloads its components at MPI_Finalize, so LeakSanitizer sees their allocations with
  // unknown frames and no suppression by library can name them: the ranks run without leak checks
  // (ASan and UBSan stay on). The same distributed code runs leak-checked in test_distributed.
  const char* asan = std::getenv("ASAN_OPTIONS");
  env.emplace_back("ASAN_OPTIONS", std::string(asan ? asan : "") + ":detect_leaks=0");
#endif
  return env;
}
const test_support::EnvChanges kMpiEnv = mpi_env();
std::vector<std::string> mpirun(int ranks) {
  return {HEADGRAD_MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", std::to_string(ranks)};
}

// `extra`: variables set (or, with "", unset) on top of kMpiEnv
pid_t start(const std::vector<std::string>& argv, const TempDir& dir, const std::string& tag,
            const test_support::EnvChanges& extra = {}) {
  test_support::EnvChanges env = kMpiEnv;
  env.insert(env.end(), extra.begin(), extra.end());
  return test_support::spawn(argv, dir / (tag + ".out"), dir / (tag + ".err"), dir.path.string(), env);
}
Result finish(pid_t pid, const TempDir& dir, const std::string& tag, double timeout_s = 120) {
  Result r;
  r.rc = test_support::wait_for(pid, timeout_s);
  r.out = read_file(dir / (tag + ".out"));
  r.err = read_file(dir / (tag + ".err"));
  return r;
}
Result run(const std::vector<std::string>& argv, const TempDir& dir, const test_support::EnvChanges& extra = {}) {
  static int n = 0;
  const std::string tag = fmt::format("run{}", n++);
  return finish(start(argv, dir, tag, extra), dir, tag);
}

// The command line of `headgrad train args...` as one process (ranks 0) or under mpirun with that
// many ranks.
std::vector<std::string> train_argv(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> argv = ranks == 0 ? std::vector<std::string>{} : mpirun(ranks);
  argv.push_back(HEADGRAD_CLI);
  argv.push_back("train");
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Runs train_argv(ranks, args), which must succeed.
Result headgrad_train(int ranks, const std::vector<std::string>& args, const TempDir& dir,
                      const test_support::EnvChanges& extra = {}) {
  const Result r = run(train_argv(ranks, args), dir, extra);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  CHECK(r.rc == 0);
  return r;
}

// The small model (headgrad train's defaults), quietly, one thread per rank, into `out`. Runs stay
// within the default warmup (300 steps), where the learning rate does not depend on --steps.
// The learning rate is pinned (not the default's): these runs stay inside a long warmup, where the
// tolerances below hold (see kParamTol).
std::vector<std::string> small(const std::string& out, std::int64_t steps, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--steps", std::to_string(steps), "--lr", "0.003", "--warmup", "300",
                                   "--eval-every", "25", "--threads", "1", "--quiet", "--out", out};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::map<std::string, std::vector<double>> tensors_of(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, t] : io::load_safetensors(path).tensors) out[name] = t.to_vector();
  return out;
}

// Every tensor of `got` close to the same-named one of `want` (or, with atol 0, equal).
void check_same_tensors(const std::map<std::string, std::vector<double>>& got,
                        const std::map<std::string, std::vector<double>>& want, double atol) {
  REQUIRE(got.size() == want.size());
  for (const auto& [name, values] : want) {
    CAPTURE(name);
    REQUIRE(got.count(name));
    if (atol == 0) CHECK(got.at(name) == values);
    else check_close(got.at(name), values, atol, 0);
  }
}

// The training losses metrics.csv logged, in step order (6 decimals).
std::vector<double> losses_of(const std::string& out_dir) {
  std::vector<double> losses;
  for (const auto& row : lines_of(read_file(out_dir + "/metrics.csv")))
    if (!row.empty() && std::isdigit(static_cast<unsigned char>(row[0])) && !contains(row, ",,,,"))
      losses.push_back(std::stod(row.substr(row.find(',') + 1)));
  return losses;
}

// Float32 runs of a few dozen Adam steps: the ranks add their shards' gradients in another order
// than one process adds the rows, and Adam's normalised updates carry such rounding differences
// to about 1e-4 in the parameters after 50 steps of the warmup (as splitting the batch over
// threads does; at the full learning rate they grow faster).
constexpr double kParamTol = 1e-3, kLossTol = 2e-5;

void check_same_run(const std::string& got_dir, const std::string& want_dir) {
  check_same_tensors(tensors_of(got_dir + "/model.safetensors"), tensors_of(want_dir + "/model.safetensors"), kParamTol);
  check_close(losses_of(got_dir), losses_of(want_dir), kLossTol, 0);
}

// What rank_program wrote for every rank: PREFIX.rank<r>.safetensors.
std::vector<std::map<std::string, std::vector<double>>> rank_files(const std::string& prefix, int ranks) {
  std::vector<std::map<std::string, std::vector<double>>> out;
  for (int r = 0; r < ranks; ++r) out.push_back(tensors_of(fmt::format("{}.rank{}.safetensors", prefix, r)));
  return out;
}

Result rank_program(int ranks, std::vector<std::string> args, const TempDir& dir,
                    const test_support::EnvChanges& extra = {}) {
  std::vector<std::string> argv = mpirun(ranks);
  argv.push_back(HEADGRAD_MPI_RANK_PROGRAM);
  argv.insert(argv.end(), args.begin(), args.end());
  const Result r = run(argv, dir, extra);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  CHECK(r.rc == 0);
  return r;
}

// The pid of rank `rank` of the job mpirun `job` started (its child whose environment says so), or -1.
pid_t rank_pid_of(pid_t job, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue; // not a process
    const std::string stat = read_file(e.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    const std::string env = read_file(e.path() / "environ");
    if (parent == job && contains(env, fmt::format("OMPI_COMM_WORLD_RANK={}", rank) + '\0'))
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

// Whether process `pid` is gone (or a zombie, which is gone but for its parent's reaping).
bool gone(pid_t pid) {
  const std::string stat = read_file(fmt::format("/proc/{}/stat", pid));
  return stat.empty() || stat.substr(stat.rfind(')') + 2, 1) == "Z";
}

} // namespace

TEST_CASE("mpirun -np 2 headgrad train = one process: 50 steps of the small model" * doctest::test_suite("mpi")) {
  TempDir dir;
  // The 2-rank run and rank_program below are compared bit for bit, so they must run the same BLAS
  // kernel. Both run as on a CPU where OpenBLAS falls back to Prescott by itself: each takes
  // headgrad's start-up path (runtime::configure), which replaces the fallback alike.
  const auto fallback = test_support::simulated_blas_fallback();
  headgrad_train(0, small(dir / "one", 50), dir);
  const Result two = headgrad_train(2, small(dir / "two", 50, {"--json", "--profile"}), dir, fallback);
  check_same_run(dir / "two", dir / "one");
  CHECK(contains(two.out, "\"ranks\": 2"));
  CHECK(test_support::count_of(two.out, "\"steps\": 50") == 1); // rank 0 alone prints
  // the profile's all-reduce line: the small model's 68496 float32 parameters in one bucket, and a
  // flag for each of its 27 tensors
  CHECK(contains(two.out, "\"allreduce_bytes_per_step\": 274092,"));
  CHECK(test_support::count_of(two.out, "all-reduce over 2 ranks: 0.27 MB per step in 1 bucket; ") == 1);
  CHECK(contains(two.out, "% of it overlapped with backward; "));

  // What the ranks hold: the same train_step on each, through rank_program. Both ranks' parameters
  // are bitwise the same, and the same as the headgrad binary's 2-rank run.
  rank_program(2, {"steps", dir / "ranks", "50", "64", "1", "0"}, dir, fallback);
  const auto ranks = rank_files(dir / "ranks", 2);
  check_same_tensors(ranks[1], ranks[0], 0);
  auto params = ranks[0];
  params.erase("losses");
  check_same_tensors(params, tensors_of(dir / "two/model.safetensors"), 0);
}

// Bitwise the same run: every parameter, every optimizer state tensor, every logged loss.
void check_same_bits(const std::string& got_dir, const std::string& want_dir) {
  check_same_tensors(tensors_of(got_dir + "/model.safetensors"), tensors_of(want_dir + "/model.safetensors"), 0);
  check_same_tensors(tensors_of(got_dir + "/optimizer.safetensors"), tensors_of(want_dir + "/optimizer.safetensors"), 0);
  CHECK(losses_of(got_dir) == losses_of(want_dir));
}

TEST_CASE("4 shards on 1 x 4 threads - 2 ranks x 2 threads - 4 ranks x 1 - 3 ranks - one thread: the same bits" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  for (const char* batch : {"64", "5"}) { // 5: shards of 1, 1, 1 and 2 rows; 3 ranks hold 1, 1 and 2 shards
    CAPTURE(batch);
    const std::string b = batch;
    auto at = [&](const char* run) { return dir / (b + run); };
    headgrad_train(0, small(at("one"), 20, {"--batch", b, "--threads", "4"}), dir);
    headgrad_train(0, small(at("shards"), 20, {"--batch", b, "--shards", "4"}), dir);
    headgrad_train(2, small(at("two"), 20, {"--batch", b, "--threads", "2"}), dir);
    headgrad_train(4, small(at("four"), 20, {"--batch", b}), dir);
    headgrad_train(3, small(at("three"), 20, {"--batch", b, "--shards", "4"}), dir);
    for (const char* run : {"shards", "two", "four", "three"}) {
      CAPTURE(run);
      check_same_bits(at(run), at("one"));
    }
    CHECK(train::load_model_checkpoint(at("four") + "/model.safetensors").config.shards == 4);
    // one shard (another S: other bits) is the same objective, to float32 rounding
    headgrad_train(0, small(at("whole"), 20, {"--batch", b}), dir);
    check_same_run(at("whole"), at("one"));
  }
  // with dropout each shard draws its masks from generators of its own, wherever it runs: the
  // same bits again (and the ranks end bitwise equal: the run checks that at the end)
  headgrad_train(0, small(dir / "dropout1", 10, {"--dropout", "0.1", "--threads", "4"}), dir);
  headgrad_train(2, small(dir / "dropout2", 10, {"--dropout", "0.1", "--threads", "2"}), dir);
  check_same_bits(dir / "dropout2", dir / "dropout1");
  // what each rank holds: the same bits on all three
  rank_program(3, {"steps", dir / "ranks", "20", "5", "1", "4"}, dir);
  const auto ranks = rank_files(dir / "ranks", 3);
  check_same_tensors(ranks[1], ranks[0], 0);
  check_same_tensors(ranks[2], ranks[0], 0);
}

TEST_CASE("--precision bf16: 4 shards on 1 x 4 threads - 2 ranks x 2 threads - one thread: the same bits; resumed "
          "on 2 ranks bit for bit" * doctest::test_suite("mpi")) {
  if (!blas::bf16_supported()) return; // (refused: tests/test_train_bf16.cpp)
  TempDir dir;
  const std::vector<std::string> bf16 = {"--precision", "bf16", "--shards", "4"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), bf16.begin(), bf16.end());
    return more;
  };
  headgrad_train(0, small(dir / "one", 20, with({"--threads", "4"})), dir);
  headgrad_train(0, small(dir / "single", 20, with({})), dir);
  headgrad_train(2, small(dir / "two", 20, with({"--threads", "2"})), dir);
  check_same_bits(dir / "single", dir / "one");
  check_same_bits(dir / "two", dir / "one");
  // half the run on 2 ranks, the rest resumed on 2 ranks (the precision comes from the checkpoint)
  headgrad_train(2, small(dir / "halves", 10, with({"--threads", "2"})), dir);
  headgrad_train(2, {"--resume", dir / "halves/model.safetensors", "--steps", "20", "--threads", "2", "--quiet",
                     "--out", dir / "halves"}, dir);
  check_same_bits(dir / "halves", dir / "one");
  // the negative control: float32 over the same shards is another run
  headgrad_train(0, small(dir / "f32", 20, {"--threads", "4", "--shards", "4"}), dir);
  CHECK(tensors_of(dir / "f32/model.safetensors") != tensors_of(dir / "one/model.safetensors"));
}

TEST_CASE("a run started on 4 ranks resumes on 1 process x 2 threads with --shards 4 bit for bit - another S only "
          "with --reshard" * doctest::test_suite("mpi")) {
  TempDir dir;
  headgrad_train(0, small(dir / "whole", 20, {"--shards", "4"}), dir);
  headgrad_train(4, small(dir / "run", 10), dir);
  const std::string ckpt = dir / "run/model.safetensors";
  auto resume = [&](std::vector<std::string> more) {
    std::vector<std::string> args = {"--resume", ckpt, "--steps", "20", "--threads", "2", "--quiet", "--out", dir / "run"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  // another shard count is refused with one line, before anything is written
  const Result refused = run(train_argv(0, resume({"--shards", "2"})), dir);
  (void)test_support::refusal_line(refused.rc, refused.headgrad_lines());
  CHECK(contains(refused.err, "--shards 2 differs from the checkpoint's 4"));
  CHECK(contains(refused.err, "--reshard"));
  headgrad_train(0, resume({"--shards", "4"}), dir);
  check_same_bits(dir / "run", dir / "whole");
  // the flag can be left out: the checkpoint's S is the run's
  headgrad_train(4, small(dir / "again", 10), dir);
  headgrad_train(0, {"--resume", dir / "again/model.safetensors", "--steps", "20", "--threads", "2", "--quiet", "--out", dir / "again"}, dir);
  check_same_bits(dir / "again", dir / "whole");
}

TEST_CASE("a 2-rank checkpoint resumes with 1 rank and a 1-rank checkpoint with 2 ranks (resharded)" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  headgrad_train(0, small(dir / "whole", 40), dir);
  // 2 ranks to step 20, then 1 rank to 40
  headgrad_train(2, small(dir / "a", 20), dir);
  headgrad_train(0, {"--resume", dir / "a/model.safetensors", "--steps", "40", "--threads", "1", "--quiet", "--out", dir / "a"}, dir);
  // 1 rank to step 20 (1 shard), then 2 ranks to 40 (2 shards: --reshard)
  headgrad_train(0, small(dir / "b", 20), dir);
  headgrad_train(2, {"--resume", dir / "b/model.safetensors", "--steps", "40", "--threads", "1", "--quiet", "--reshard",
                     "--out", dir / "b"}, dir);
  for (const char* run : {"a", "b"}) {
    CAPTURE(run);
    CHECK(train::load_model_checkpoint(dir / (std::string(run) + "/model.safetensors")).step == 40);
    check_same_run(dir / run, dir / "whole");
  }
}

TEST_CASE("a rank killed with SIGKILL ends the job in seconds and leaves a checkpoint that resumes" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  const std::string out = dir / "run";
  const pid_t job =
      start(train_argv(2, small(out, 100000, {"--save-every", "10", "--eval-every", "0"})), dir, "killed");
  auto rank_pid = [&](int rank) { return rank_pid_of(job, rank); };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(out + "/model.safetensors") && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200)); // into the steps after it
  const pid_t rank0 = rank_pid(0), rank1 = rank_pid(1);
  REQUIRE(rank0 > 0);
  REQUIRE(rank1 > 0);
  REQUIRE(kill(rank1, SIGKILL) == 0);
  const auto killed = std::chrono::steady_clock::now();
  const Result r = finish(job, dir, "killed", 30);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  INFO("stderr: ", r.err);
  MESSAGE("the job ended ", seconds, " s after rank 1 was killed");
  CHECK(r.rc != 0);
  CHECK(seconds < 15);
  CHECK(contains(r.err, "rank 1"));
  CHECK(contains(r.err, "signal 9"));
  // no rank left behind (a rank that exited may stay a zombie until init reaps it: that is gone).
  // mpirun may return while rank 0 still handles the SIGTERM it was sent (under AddressSanitizer
  // that took longer than mpirun waited): it has seconds to end, not forever.
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!gone(rank0) && std::chrono::steady_clock::now() < grace)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(gone(rank0));

  // the last checkpoint is whole, with its optimizer state, and the run resumes on 2 ranks
  train::LoadedRun run = train::load_model_checkpoint(out + "/model.safetensors");
  CHECK(run.step % 10 == 0);
  auto opt = train::make_optimizer(run.config, run.model->named_parameters());
  train::load_optimizer_state(out + "/model.safetensors", run.step, *opt);
  const std::string target = std::to_string(run.step + 10);
  headgrad_train(2, {"--resume", out + "/model.safetensors", "--steps", target, "--threads", "1", "--quiet", "--out", out}, dir);
  CHECK(train::load_model_checkpoint(out + "/model.safetensors").step == run.step + 10);
  // ... to where an uninterrupted 2-rank run gets, bit for bit
  headgrad_train(2, small(dir / "whole", run.step + 10, {"--eval-every", "0"}), dir);
  check_same_tensors(tensors_of(out + "/model.safetensors"), tensors_of(dir / "whole/model.safetensors"), 0);
}

TEST_CASE("a stopped rank (SIGSTOP) ends the job after --rank-timeout with one line naming it" * doctest::test_suite("mpi")) {
  TempDir dir;
  const std::string out = dir / "run";
  const pid_t job =
      start(train_argv(2, small(out, 100000, {"--eval-every", "0", "--rank-timeout", "2"})), dir, "stopped");
  test_support::wait_for_lines(out + "/metrics.csv", 6);
  const pid_t rank1 = rank_pid_of(job, 1);
  REQUIRE(rank1 > 0);
  REQUIRE(kill(rank1, SIGSTOP) == 0); // as a debugger, a full node or a job control accident would
  const auto stopped = std::chrono::steady_clock::now();
  const Result r = finish(job, dir, "stopped", 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  if (!gone(rank1)) kill(rank1, SIGKILL); // (not left behind whatever the outcome)
  INFO("stderr: ", r.err);
  MESSAGE("the job ended ", seconds, " s after rank 1 was stopped");
  CHECK(r.rc != 0);
  CHECK(seconds < 30);
  const auto lines = r.headgrad_lines();
  REQUIRE(lines.size() == 1);
  CHECK(contains(lines[0], "headgrad train: a collective waited 2 s (the rank timeout) for the other ranks: rank 1 did "
                           "not answer (stopped, hung or cut off)"));
  CHECK(contains(lines[0], "(rank 0 of 2; ending the job)"));
}

TEST_CASE("a slow but working rank 0 is not taken for a stopped one: evaluations longer than --rank-timeout pass" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  const std::string out = dir / "run";
  // two evaluations (steps 10 and 20) of several seconds each while rank 1 waits, with a 1 s timeout
  const auto started = std::chrono::steady_clock::now();
  const Result r = run(train_argv(2, small(out, 20, {"--eval-every", "10", "--eval-count", "30000", "--rank-timeout",
                                                     "1"})),
                       dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  MESSAGE("2 ranks, 20 steps, 2 evaluations of 30000 sequences with --rank-timeout 1: ", seconds, " s, exit ", r.rc);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  CHECK(r.rc == 0);
  CHECK(seconds > 3); // the evaluations did outlast the timeout
  CHECK_FALSE(contains(r.err, "did not answer"));
  CHECK(train::load_model_checkpoint(out + "/model.safetensors").step == 20);
}

TEST_CASE("a collective gives up after the rank timeout - the lowest live rank names the silent one" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  std::vector<std::string> argv = mpirun(3);
  argv.insert(argv.end(), {HEADGRAD_MPI_RANK_PROGRAM, "stall"});
  const auto started = std::chrono::steady_clock::now();
  const Result r = run(argv, dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  CHECK(r.rc != 0);
  CHECK(seconds < 30); // (the silent rank sleeps 60 s)
  // rank 1 waits for rank 0 (its pair), rank 0 for rank 2: the survey, not the partner, names the
  // silent rank, and rank 0, the lowest live one, reports it
  CHECK(contains(r.out, "rank 0 gave up: a collective waited 1 s (the rank timeout) for the other ranks: rank 2 did "
                        "not answer (stopped, hung or cut off) [silent: 2]"));
  CHECK_FALSE(contains(r.out, "no timeout"));
}

TEST_CASE("ranks that read different texts under the same vocabulary are refused" * doctest::test_suite("mpi")) {
  TempDir dir;
  // the same file name, other contents on each "machine" (working directory), the same characters
  for (const auto& [sub, line] : {std::pair{"a", "the cat sat on the mat.\n"}, std::pair{"b", "the mat sat on the cat.\n"}}) {
    fs::create_directories(dir / sub);
    test_support::write_file(dir / (std::string(sub) + "/corpus.txt"), test_support::repeated(line, 30));
  }
  std::vector<std::string> argv = {HEADGRAD_MPIEXEC, "--oversubscribe", "--bind-to", "none"};
  for (const char* sub : {"a", "b"}) {
    if (std::string(sub) == "b") argv.push_back(":");
    for (const auto& a : {"-np", "1", "-wdir"}) argv.push_back(a);
    argv.push_back(dir / sub);
    for (const auto& a : {HEADGRAD_CLI, "train", "--task", "text", "--text", "corpus.txt", "--context", "8", "--batch",
                          "2", "--steps", "1", "--eval-count", "4", "--threads", "1", "--quiet", "--out"})
      argv.push_back(a);
    argv.push_back(dir / "run");
  }
  const Result r = run(argv, dir);
  INFO("stderr: ", r.err);
  const std::string line = test_support::refusal_line(r.rc, r.headgrad_lines());
  CHECK(contains(line, "headgrad train: the ranks read different texts: rank 1's text has fingerprint "));
  CHECK(contains(line, "rank 0's (--text " + dir / "a/corpus.txt" + ") ")); // stored as an absolute path
  CHECK(contains(line, "every rank must read the same contents"));
  CHECK_FALSE(fs::exists(dir / "run/model.safetensors"));
}

TEST_CASE("Ctrl-C on mpirun: rank 0 saves one checkpoint and the job exits" * doctest::test_suite("mpi")) {
  TempDir dir;
  const std::string out = dir / "run";
  std::vector<std::string> argv = train_argv(2, small(out, 100000, {"--eval-every", "0"}));
  argv.erase(std::find(argv.begin(), argv.end(), "--quiet"));
  const pid_t job = start(argv, dir, "interrupted");
  test_support::wait_for_lines(out + "/metrics.csv", 6);
  REQUIRE(kill(job, SIGINT) == 0); // what a terminal's Ctrl-C sends mpirun
  const Result r = finish(job, dir, "interrupted", 30);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  const train::LoadedRun run = train::load_model_checkpoint(out + "/model.safetensors");
  CHECK(run.step >= 5);
  CHECK(test_support::count_of(r.out, fmt::format("interrupted at step {}:", run.step)) == 1);
  CHECK(fs::exists(out + "/optimizer.safetensors"));
}

TEST_CASE("refused with one line before training: a batch smaller than the ranks - ranks given other flags" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  // as on a CPU where OpenBLAS falls back by itself: the start-up note (if this CPU has a better
  // kernel) comes first, and is not an error
  auto refused = [&](const std::vector<std::string>& argv, const std::string& want) {
    const Result r = run(argv, dir, test_support::simulated_blas_fallback());
    INFO("stderr: ", r.err);
    CHECK(contains(test_support::refusal_line(r.rc, r.headgrad_lines()), want));
  };
  refused(train_argv(2, {"--batch", "1", "--out", dir / "a"}),
          "headgrad train: --batch 1 is smaller than the 2 ranks");
  refused(train_argv(2, {"--shards", "1", "--out", dir / "a"}),
          "headgrad train: --shards 1 is fewer than the 2 ranks: each rank needs a shard");
  // two programs in one job (mpirun's MPMD form), the second with another learning rate
  std::vector<std::string> argv = {HEADGRAD_MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", "1", HEADGRAD_CLI,
                                   "train", "--lr", "0.01", "--out", dir / "b", ":", "-np", "1", HEADGRAD_CLI, "train",
                                   "--lr", "0.02", "--out", dir / "b"};
  refused(argv, "headgrad train: ranks disagree on --lr: rank 1 has 0.02, rank 0 has 0.01");
  // a flag only rank 1 cannot read: rank 0 reports rank 1's error
  argv = {HEADGRAD_MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", "1", HEADGRAD_CLI, "train",
          "--out", dir / "c", ":", "-np", "1", HEADGRAD_CLI, "train", "--bogus", "1", "--out", dir / "c"};
  refused(argv, "headgrad train: unknown flag --bogus");
  argv = mpirun(2);
  argv.insert(argv.end(), {HEADGRAD_CLI, "eval", "--checkpoint", "x"});
  refused(argv, "headgrad: eval runs as a single process");
  for (const char* d : {"a", "b", "c"}) CHECK_FALSE(fs::exists(dir / (std::string(d) + "/model.safetensors")));

  const Result info = run([&] {
    auto a = mpirun(2);
    a.insert(a.end(), {HEADGRAD_CLI, "info"});
    return a;
  }(), dir);
  CHECK(info.rc == 0);
  CHECK(test_support::count_of(info.out, "MPI ranks:       2 (2 on this machine)") == 1);
  CHECK(contains(info.out, "(built with MPI support)"));
}

TEST_CASE("DataParallel and allreduce_gradients on a user's own module = single-process gradients" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  // the reference: rank 0's initialisation (seed 100), the whole batch in one process
  auto reference = [](std::int64_t rows) {
    user_module::TwoLayerNet net(100);
    user_module::shard_loss(net, user_module::global_batch(rows), 0, rows).backward();
    std::map<std::string, std::vector<double>> out;
    for (const auto& [name, p] : net.named_parameters()) {
      out["param." + name] = p.to_vector();
      out["ddp." + name] = p.grad().to_vector();
      out["simple." + name] = p.grad().to_vector();
    }
    return out;
  };
  // 7 rows on 2 ranks (3 + 4); 2 rows on 3 ranks (0 + 1 + 1: rank 0 has none)
  for (const auto& [ranks, rows] : {std::pair{2, 7}, std::pair{3, 2}}) {
    CAPTURE(ranks);
    const std::string prefix = dir / fmt::format("user{}", ranks);
    rank_program(ranks, {"user-module", prefix, std::to_string(rows)}, dir);
    const auto want = reference(rows);
    for (const auto& got : rank_files(prefix, ranks)) check_same_tensors(got, want, 1e-13);
  }
}

TEST_CASE("ranks whose modules differ are refused - and a one-ulp drift is found and named" * doctest::test_suite("mpi")) {
  TempDir dir;
  const Result refused = rank_program(2, {"different-modules"}, dir);
  for (int r = 0; r < 2; ++r)
    CHECK(contains(refused.out, fmt::format("rank {} refused: broadcast_parameters: the ranks' modules differ: "
                                            "parameter 0 is 'weight' [5, 4] float64 on rank 1 but 'hidden.weight' [6, 4] "
                                            "float64 on rank 0",
                                            r)));
  const Result drift = rank_program(2, {"drift"}, dir);
  for (int r = 0; r < 2; ++r)
    CHECK(contains(drift.out, fmt::format("rank {} stopped: step 3: parameter 'dense.bias' differs between rank 0 and "
                                          "rank 1; the ranks drifted apart, training stopped",
                                          r)));
}

TEST_CASE("train::Trainer under mpirun: 2 ranks x 1 or 2 threads = one process, and a checkpoint resumes across them" *
          doctest::test_suite("mpi")) {
  TempDir dir;
  auto trainer = [&](int ranks, const std::string& out, std::int64_t steps, int threads) {
    std::vector<std::string> argv = ranks == 0 ? std::vector<std::string>{} : mpirun(ranks);
    argv.insert(argv.end(), {HEADGRAD_MPI_RANK_PROGRAM, "trainer", dir / out, std::to_string(steps),
                             std::to_string(threads)});
    const Result r = run(argv, dir);
    INFO(r.err);
    CHECK(r.rc == 0);
    return r.out;
  };
  const std::string one = trainer(0, "one", 16, 1);
  CHECK(test_support::starts_with(one, "step 16: crc32c "));
  CHECK(trainer(2, "two", 16, 1) == one);
  CHECK(trainer(2, "two_by_two", 16, 2) == one);
  // stopped at step 8 on 2 ranks, resumed by one process on 2 threads
  CHECK(test_support::starts_with(trainer(2, "moved", 8, 1), "step 8: "));
  CHECK(trainer(0, "moved", 16, 2) == one);
}