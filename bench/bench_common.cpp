#include "bench/bench_common.hpp"

#include <algorithm>
#include <array>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>

#include "framework/kernels/gemm_batched.hpp"
#include "framework/random.hpp"

namespace headgrad::bench {

std::string BenchConfig::str() const {
  return fmt::format("B{} T{} ({}-{}) d{} h{} L{} ffn{} V{}", run.batch, run.max_len, run.min_len, run.max_len,
                     run.d_model, run.heads, run.layers, run.ffn, run.vocab);
}

namespace {
// `settings` with the shape (task, model and batch sizes) of `shape`.
train::RunConfig with_shape(const train::RunConfig& settings, const train::RunConfig& shape) {
  train::RunConfig c = settings;
  train::visit_run_fields([&](const train::FieldInfo& f, auto member) {
    if (f.role == train::Role::shape) c.*member = shape.*member;
  });
  return c;
}
} // namespace

BenchConfig small_config(const train::RunConfig& settings) { return {"small", with_shape(settings, {})}; }

BenchConfig large_config(const train::RunConfig& settings) {
  train::RunConfig shape;
  shape.batch = 16;
  shape.min_len = 64;
  shape.max_len = 128;
  shape.d_model = 256;
  shape.heads = 8;
  shape.ffn = 1024;
  return {"large", with_shape(settings, shape)};
}

BenchConfig config_by_name(const std::string& name, const train::RunConfig& settings) {
  if (name == "small") return small_config(settings);
  if (name == "large") return large_config(settings);
  throw std::invalid_argument(fmt::format("unknown configuration '{}' (small or large)", name));
}

std::string settings_summary(const train::RunConfig& c) {
  std::string s = fmt::format("{} lr {:g}", c.optimizer, c.lr);
  if (c.weight_decay != 0) s += fmt::format(" wd {:g}", c.weight_decay);
  if (c.optimizer == "sgd") s += fmt::format(" momentum {:g}", c.momentum);
  s += fmt::format(", warmup {}, {} schedule, clip {:g}, <= {} steps, seed {}", c.warmup, c.schedule, c.clip, c.steps,
                   c.seed);
  if (c.dropout != 0) s += fmt::format(", dropout {:g}", c.dropout);
  return s;
}

// ---- FLOP model ---------------------------------------------------------------------------------
double forward_flops(const train::RunConfig& c) {
  const double B = static_cast<double>(c.batch), T = static_cast<double>(c.max_len), d = static_cast<double>(c.d_model);
  const double M = B * T, L = static_cast<double>(c.layers), f = static_cast<double>(c.ffn),
               V = static_cast<double>(c.vocab);
  return L * (8 * M * d * d + 4 * B * T * T * d + 4 * M * d * f) + 2 * M * d * V;
}

double step_flops(const train::RunConfig& c) { return 3 * forward_flops(c); }

std::string GemmShape::str() const {
  std::string s = fmt::format("{}{} {}x{}x{}", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k);
  if (batch > 1) s += fmt::format(" x{}", batch);
  return s;
}

std::vector<GemmShape> model_gemm_shapes(const train::RunConfig& c) {
  const std::int64_t M = c.batch * c.max_len, T = c.max_len, d = c.d_model, dh = c.d_model / c.heads,
                     BH = c.batch * c.heads, L = c.layers;
  std::vector<GemmShape> all;
  // y (M, out) = x (M, in) W^T, W (out, in); backward dx = dy W, dW = dy^T x (framework/ops/linear.cpp)
  auto linear = [&](const char* name, std::int64_t in, std::int64_t out, std::int64_t count) {
    all.push_back({false, true, M, out, in, 1, count, fmt::format("{} fwd", name)});
    all.push_back({false, false, M, in, out, 1, count, fmt::format("{} dx", name)});
    all.push_back({true, false, out, in, M, 1, count, fmt::format("{} dW", name)});
  };
  linear("W_qkvo", d, d, 4 * L);
  linear("ffn.dense1", d, c.ffn, L);
  linear("ffn.dense2", c.ffn, d, L);
  linear("dense", d, c.vocab, 1);
  // per (batch row, head): S (T, T) = Q K^T; O (T, dh) = P V; backward dP = dO V^T, dV = P^T dO,
  // dQ = dS K, dK = dS^T Q
  all.push_back({false, true, T, T, dh, BH, L, "scores fwd"});
  all.push_back({false, false, T, dh, T, BH, L, "context fwd"});
  all.push_back({false, true, T, T, dh, BH, L, "context dP"});
  all.push_back({true, false, T, dh, T, BH, L, "context dV"});
  all.push_back({false, false, T, dh, T, BH, L, "scores dQ"});
  all.push_back({true, false, T, dh, T, BH, L, "scores dK"});

  std::vector<GemmShape> merged;
  for (const auto& g : all) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const GemmShape& x) {
      return std::tie(x.ta, x.tb, x.m, x.n, x.k, x.batch) == std::tie(g.ta, g.tb, g.m, g.n, g.k, g.batch);
    });
    if (it == merged.end()) {
      merged.push_back(g);
    } else {
      it->count += g.count;
      it->what += ", " + g.what;
    }
  }
  return merged;
}

SgemmLimit measure_sgemm_limit(const train::RunConfig& c, double min_seconds, int threads) {
  SgemmLimit out;
  double step_time = 0, total_flops = 0;
  Generator gen(1234);
  for (const auto& g : model_gemm_shapes(c)) {
    // op(A) is m x k: stored (m, k) or, transposed, (k, m); op(B) is k x n likewise.
    const std::int64_t a_size = g.m * g.k, b_size = g.k * g.n, c_size = g.m * g.n;
    std::vector<float> A(static_cast<std::size_t>(a_size * g.batch)), Bm(static_cast<std::size_t>(b_size * g.batch)),
        C(static_cast<std::size_t>(c_size * g.batch), 0.0f);
    for (auto& x : A) x = static_cast<float>(gen.uniform() - 0.5);
    for (auto& x : Bm) x = static_cast<float>(gen.uniform() - 0.5);
    const int lda = static_cast<int>(g.ta ? g.m : g.k), ldb = static_cast<int>(g.tb ? g.k : g.n),
              ldc = static_cast<int>(g.n);
    auto blas_threads = [&] { // OpenBLAS threads each call itself
      for (std::int64_t i = 0; i < g.batch; ++i)
        cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                    static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, A.data() + i * a_size, lda,
                    Bm.data() + i * b_size, ldb, 0.0f, C.data() + i * c_size, ldc);
    };
    std::vector<kernels::BatchOffsets> offs;
    for (std::int64_t i = 0; i < g.batch; ++i) offs.push_back({i * a_size, i * b_size, i * c_size});
    auto headgrad_split = [&] { // over OpenMP threads, as the framework runs it
      kernels::gemm_batched(g.ta, g.tb, g.m, g.n, g.k, 1.0f, A.data(), lda, Bm.data(), ldb, 0.0f, C.data(), ldc, offs,
                            true);
    };
    auto time_best = [&](auto&& call) {
      call(); // warm-up: thread pool, caches
      double best_t = 1e30, spent = 0;
      int reps = 0;
      while (reps < 3 || (spent < min_seconds && reps < 100000)) {
        const double t0 = now_seconds();
        call();
        const double dt = now_seconds() - t0;
        best_t = std::min(best_t, dt);
        spent += dt;
        ++reps;
      }
      return best_t;
    };
    const int saved = openblas_get_num_threads();
    openblas_set_num_threads(threads);
    const double t_blas = time_best(blas_threads);
    openblas_set_num_threads(saved);
    const double best = std::min(t_blas, time_best(headgrad_split));
    const double gflops = g.flops() / best * 1e-9;
    out.shapes.push_back({g, best, gflops});
    if (gflops > out.best_gflops) {
      out.best_gflops = gflops;
      out.best_shape = g.str();
    }
    step_time += static_cast<double>(g.count) * best;
    total_flops += static_cast<double>(g.count) * g.flops();
  }
  out.mix_gflops = step_time > 0 ? total_flops / step_time * 1e-9 : 0;
  out.matmul_ms_per_step = step_time * 1e3;
  return out;
}

// ---- processes ----------------------------------------------------------------------------------
std::int64_t proc_status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.rfind(prefix, 0) == 0) return std::strtoll(line.c_str() + prefix.size(), nullptr, 10);
  return -1;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {
std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> v;
  for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}
} // namespace

int run_process(const std::vector<std::string>& argv, const EnvChanges& env, const std::string& stdout_path) {
  std::fflush(stdout);
  std::fflush(stderr);
  auto args = c_argv(argv);
  // The child's environment, built before fork (only async-signal-safe calls after it).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (!env.count(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env)
    if (v) env_strings.push_back(k + "=" + *v);
  auto envp = c_argv(env_strings);
  const int fd = stdout_path.empty() ? -1 : open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!stdout_path.empty() && fd < 0) return 127;
  const pid_t pid = fork();
  if (pid < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  if (pid == 0) {
    if (fd >= 0 && dup2(fd, STDOUT_FILENO) < 0) _exit(127);
    execve(args[0], args.data(), envp.data());
    static const char msg[] = "bench: cannot run a child process\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(127);
  }
  if (fd >= 0) close(fd);
  return wait_for(pid);
}

std::string capture_process(const std::vector<std::string>& argv, int* code) {
  std::fflush(stdout);
  std::fflush(stderr);
  int fds[2];
  if (pipe(fds) != 0) {
    *code = -1;
    return "";
  }
  auto args = c_argv(argv);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    *code = -1;
    return "";
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[1]);
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  std::array<char, 4096> buf;
  for (;;) {
    const ssize_t n = read(fds[0], buf.data(), buf.size());
    if (n > 0) out.append(buf.data(), static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  *code = wait_for(pid);
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace headgrad::bench
