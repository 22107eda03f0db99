// test_support.hpp - what the test files share: random tensors and leaves, closeness and NaN-aware
// equality checks, the message of a thrown exception, temporary directories, whole-file reads and
// writes, text helpers, running a program and the one line a refused run prints.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <source_location>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/nn/module.hpp"
#include "framework/core/random.hpp"
#include "framework/core/tensor.hpp"

namespace test_support {

namespace fs = std::filesystem;
using headgrad::Dims;
using headgrad::DType;
using headgrad::Tensor;

// N(0, 1) values from a fixed seed (float64 unless asked otherwise).
inline Tensor randn(const Dims& shape, std::uint64_t seed, DType dtype = DType::f64) {
  headgrad::Generator g(seed);
  return Tensor::normal(shape, 0.0, 1.0, g, dtype);
}

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A tensor of these values that requires grad (a leaf of the graph).
inline Tensor leaf(const std::vector<double>& v, const Dims& shape, DType dtype = DType::f64) {
  Tensor t = Tensor::from(v, shape, dtype);
  t.set_requires_grad(true);
  return t;
}

// NaN-aware equality: NaN matches NaN, everything else must be equal.
inline void check_same(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = t.to_vector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i, ": got ", got[i], ", want ", want[i]);
    CHECK((std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i]));
  }
}

// Every element close to the reference in numpy.isclose's (and torch.allclose's) sense:
// |got - want| <= atol + rtol |want|. rtol defaults to atol (an absolute bound for small values,
// a relative one for large); pass rtol = 0 for a purely absolute bound.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol = 1e-12,
                        double rtol = -1) {
  if (rtol < 0) rtol = atol;
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i, ": got ", got[i], ", want ", want[i]);
    CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}
inline void check_close(const Tensor& got, const std::vector<double>& want, double atol = 1e-12, double rtol = -1) {
  check_close(got.to_vector(), want, atol, rtol);
}

// Every parameter's gradient of `m`, one after the other in parameter order (each must exist).
inline std::vector<double> gradients_of(const headgrad::nn::Module& m) {
  std::vector<double> out;
  for (const auto& [name, p] : m.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    const auto g = p.grad().to_vector();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

// The op names of every node behind `root` (its graph, before backward frees it).
inline std::vector<std::string> node_names(const headgrad::Tensor& root) {
  std::vector<std::string> names;
  for (const auto& t : headgrad::topological_order(root))
    if (t->grad_fn) names.push_back(t->grad_fn->name);
  return names;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// How often `part` occurs in s (non-overlapping).
inline std::size_t count_of(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + part.size())) ++n;
  return n;
}

// `text`, n times over.
inline std::string repeated(const std::string& text, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += text;
  return s;
}

inline std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The message of the E that f throws. Anything else - another exception, or nothing thrown - is a
// failed check (and the returned text says which).
template <typename E = std::exception, typename F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (...) {
    std::string what = "(not a std::exception)";
    try {
      throw;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    FAIL_CHECK("expected another exception type, got: " << what);
    return "<wrong exception type> " + what;
  }
  FAIL_CHECK("expected an exception, nothing was thrown");
  return "<no exception>";
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under the system temp dir, removed (with everything in it) at scope exit.
// It is named after the test file that makes it (or `tag`), so leftovers say where they came from.
struct TempDir {
  fs::path path;
  explicit TempDir(std::source_location made_in = std::source_location::current())
      : TempDir(fs::path(made_in.file_name()).stem().string()) {}
  explicit TempDir(const std::string& tag) {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("headgrad_{}_{}_{}", tag, ::getpid(), n++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec); // a test may have made it read-only
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // Leftover temporary files ("<name>.tmp.<pid>.<n>", as atomic writes name them) anywhere inside.
  std::vector<std::string> temp_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (contains(e.path().filename().string(), ".tmp.")) out.push_back(e.path().string());
    return out;
  }
};

// Sets an environment variable in this process for the life of the object (then unsets it): a
// switch such as HEADGRAD_BF16_ASSUME_MISSING that the code under test reads when called.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

// ---- running a program (the headgrad binary, HEADGRAD_CLI) --------------------------------------

// Variables to set in a child's environment; an empty value unsets the variable.
using EnvChanges = std::vector<std::pair<std::string, std::string>>;

// Starts argv (argv[0] a path) with stdout and stderr written to the given files, in `cwd` when
// it is not empty. `in_child`, when given, runs in the child before anything else (e.g. to set a
// resource limit). Returns the child's pid.
inline pid_t spawn(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path,
                   const std::string& cwd = "", const EnvChanges& env = {},
                   const std::function<void()>& in_child = {}) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (in_child) in_child();
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    for (const auto& [k, v] : env) {
      if (v.empty()) unsetenv(k.c_str());
      else setenv(k.c_str(), v.c_str(), 1);
    }
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<std::string> args = argv;
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    execv(cargs[0], cargs.data());
    _exit(127);
  }
  return pid;
}

// The exit code of pid, or -signal. A child still running after timeout_s is killed and the test
// fails.
inline int wait_for(pid_t pid, double timeout_s = 60) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("the child did not exit in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Waits until the file at `path` has at least `n` lines (a running child's log, e.g. metrics.csv),
// or timeout_s has passed; returns whether it got there.
inline bool wait_for_lines(const fs::path& path, std::size_t n, double timeout_s = 60) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (lines_of(read_file(path)).size() < n) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// An informational line of headgrad's ("headgrad: note: ..."), never an error: e.g. the start-up
// notice printed when headgrad chose the OpenBLAS kernel itself, which happens only on CPUs where
// OpenBLAS falls back to a generic kernel. Tests that count error lines skip these.
inline bool is_note(const std::string& line) { return line.rfind("headgrad: note: ", 0) == 0; }

// The environment of a CPU where OpenBLAS falls back to its generic Prescott kernel by itself, as
// OpenBLAS 0.3.21 does on Intel models it does not know: a program that skips
// runtime::configure() really runs Prescott, and configure() replaces it with this CPU's kernel
// (the test hook of framework/engine/runtime/startup.hpp). Whatever CPU the tests run on, this is how
// they cover that one.
inline EnvChanges simulated_blas_fallback() {
  return {{"OPENBLAS_CORETYPE", "Prescott"}, {"HEADGRAD_BLAS_AUTOCORE_ASSUME", "Prescott"},
          {"HEADGRAD_BLAS_AUTOCORE", ""},    {"HEADGRAD_BLAS_AUTOCORE_FROM", ""},
          {"HEADGRAD_REEXECED", ""},         {"OMP_WAIT_POLICY", ""}};
}

// What a run of the headgrad binary printed, and its exit code.
struct CliRun {
  int rc = -1;
  std::string out, err;
  // stderr lines without headgrad's informational notes (is_note)
  std::vector<std::string> err_lines() const {
    std::vector<std::string> v;
    for (auto& l : lines_of(err))
      if (!is_note(l)) v.push_back(l);
    return v;
  }
};

// The one line a refused run printed - the CLI's rule: exit code 2 and one line on stderr - of the
// lines `lines` (a run's stderr lines without notes); the check fails otherwise.
inline std::string refusal_line(int rc, const std::vector<std::string>& lines) {
  CHECK(rc == 2);
  REQUIRE(lines.size() == 1);
  return lines[0];
}
// The same for a run (CliRun, or any with rc, out, err and err_lines()).
template <typename Run> std::string refusal_line(const Run& r) {
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  return refusal_line(r.rc, r.err_lines());
}

// Runs the headgrad binary (HEADGRAD_CLI) with `args` in `cwd`, capturing stdout, stderr (in
// files inside cwd) and the exit code. env: variables to set in the child ("" as the value: unset).
#ifdef HEADGRAD_CLI
inline CliRun run_cli(const std::vector<std::string>& args, const fs::path& cwd, const EnvChanges& env = {}) {
  static int n = 0;
  const std::string out_path = (cwd / fmt::format("cli{}.out", n)).string();
  const std::string err_path = (cwd / fmt::format("cli{}.err", n)).string();
  ++n;
  std::vector<std::string> all = {HEADGRAD_CLI};
  all.insert(all.end(), args.begin(), args.end());
  CliRun r;
  r.rc = wait_for(spawn(all, out_path, err_path, cwd.string(), env), 600);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}
#endif

} // namespace test_support
