// gemm_bench.cpp - headgrad_gemm_bench: single-thread GFLOP/s of the training steps' own gemms
// (bench/flop_model.hpp lists them per configuration) for OpenBLAS's sgemm and oneDNN's matmul
// (framework/engine/blas/): float32, bf16 inputs already in bf16, and bf16 with both inputs
// converted from float32 inside every call. Also what creating a oneDNN primitive costs against
// running it, and what the float32 -> bf16 conversion costs.
//
//   headgrad_gemm_bench [--config text|small|large|all] [--rounds N] [--seconds S]
//
// Configurations: text = the language model of `headgrad train --task text` (nanoGPT's
// shakespeare_char recipe at its CPU size: batch 12, context 64, d 128, 4 heads, 4 layers, ffn
// 512, with the 113 characters of the default corpus as its vocabulary); small = the default toy
// run (RunConfig{}); large = the benchmark's large toy configuration (bench/bench_config.cpp).
// Each round times every shape and kind once (at least --seconds of calls each), kinds
// interleaved; the figures are medians over the rounds. GFLOP/s count 2 m n k per gemm; a mix is
// the step's FLOPs over the time of its gemms at their measured speeds (count x time per shape).
#include <algorithm>
#include <array>
#include <cblas.h>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_config.hpp"
#include "bench/flop_model.hpp"
#include "bench/timing.hpp"
#include "framework/core/random.hpp"
#include "framework/engine/blas/bf16.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/blas/onednn_matmul.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/runtime/threads.hpp"

using namespace headgrad;
using blas::bf16;

namespace {

struct Options {
  std::string config = "all";
  int rounds = 7;
  double seconds = 0.05;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", a));
      return argv[++i];
    };
    if (a == "--config") o.config = value();
    else if (a == "--rounds") o.rounds = std::max(1, std::stoi(value()));
    else if (a == "--seconds") o.seconds = std::stod(value());
    else throw std::invalid_argument(fmt::format("unknown option '{}' (--config text|small|large|all, --rounds N, "
                                                 "--seconds S)", a));
  }
  if (o.config != "all" && o.config != "text" && o.config != "small" && o.config != "large")
    throw std::invalid_argument(fmt::format("--config {}: text, small, large or all", o.config));
  return o;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string s;
  std::getline(f, s);
  return s;
}

train::RunConfig text_config() {
  train::RunConfig c;
  c.task = data::Task::text;
  c.batch = 12;
  c.context = 64;
  c.d_model = 128;
  c.heads = 4;
  c.layers = 4;
  c.ffn = 512;
  c.vocab = 113; // the distinct characters of Debian's fortunes, the default corpus
  return c;
}

enum Kind { kOpenblas, kOnednnF32, kOnednnBf16, kOnednnBf16Convert, kKinds };
const char* kKindNames[kKinds] = {"OpenBLAS sgemm", "oneDNN f32", "oneDNN bf16", "oneDNN bf16 + conversion"};

// One shape's operands: `batch` gemms, each op(A) m x k and op(B) k x n, packed.
struct ShapeRun {
  bench::GemmShape g;
  std::int64_t lda, ldb, ldc, a_size, b_size, c_size;
  std::vector<float> a, b, c;
  std::vector<bf16> a16, b16;
  ShapeRun(const bench::GemmShape& shape, Generator& gen)
      : g(shape), lda(shape.ta ? shape.m : shape.k), ldb(shape.tb ? shape.k : shape.n), ldc(shape.n),
        a_size(shape.m * shape.k), b_size(shape.k * shape.n), c_size(shape.m * shape.n) {
    a.resize(static_cast<std::size_t>(a_size * g.batch));
    b.resize(static_cast<std::size_t>(b_size * g.batch));
    c.assign(static_cast<std::size_t>(c_size * g.batch), 0.0f);
    for (auto& x : a) x = static_cast<float>(gen.uniform() - 0.5);
    for (auto& x : b) x = static_cast<float>(gen.uniform() - 0.5);
    a16.resize(a.size());
    b16.resize(b.size());
    blas::to_bf16(a16.data(), a.data(), static_cast<std::int64_t>(a.size()));
    blas::to_bf16(b16.data(), b.data(), static_cast<std::int64_t>(b.size()));
  }
  void run(Kind kind) {
    for (std::int64_t i = 0; i < g.batch; ++i) {
      const float* ai = a.data() + i * a_size;
      const float* bi = b.data() + i * b_size;
      float* ci = c.data() + i * c_size;
      switch (kind) {
      case kOpenblas:
        cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                    static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, ai, static_cast<int>(lda),
                    bi, static_cast<int>(ldb), 0.0f, ci, static_cast<int>(ldc));
        break;
      case kOnednnF32: blas::onednn_sgemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, ai, lda, bi, ldb, 0.0f, ci, ldc); break;
      case kOnednnBf16:
        blas::onednn_bf16_gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a16.data() + i * a_size, lda, b16.data() + i * b_size,
                               ldb, 0.0f, ci, ldc);
        break;
      case kOnednnBf16Convert: blas::onednn_bf16_gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, ai, lda, bi, ldb, 0.0f, ci, ldc); break;
      default: break;
      }
    }
  }
};

// Seconds per call of f: calls repeated for at least `seconds`, total over count.
double time_per_call(const std::function<void()>& f, double seconds) {
  std::int64_t reps = 0;
  const double t0 = bench::now_seconds();
  double t = t0;
  do {
    f();
    ++reps;
    t = bench::now_seconds();
  } while (t - t0 < seconds);
  return (t - t0) / static_cast<double>(reps);
}

struct ConfigResult {
  std::string name, shape_str;
  std::vector<bench::GemmShape> shapes;
  std::vector<std::array<double, kKinds>> seconds; // median per shape and kind
  std::vector<std::string> impl_f32, impl_bf16;
  std::array<double, kKinds> mix_all{}, mix_linear{};
  double step_gflop = 0;
};

ConfigResult measure_config(const std::string& name, const train::RunConfig& c, const Options& o, bool bf16) {
  ConfigResult r;
  r.name = name;
  r.shape_str = fmt::format("B{} T{} d{} h{} L{} ffn{} V{}", c.batch, c.sequence_length(), c.d_model, c.heads,
                            c.layers, c.ffn, c.vocab);
  bench::check_flop_model(c, name);
  r.shapes = bench::model_gemm_shapes(c);
  r.step_gflop = bench::step_flops(c) * 1e-9;
  Generator gen(1234);
  std::vector<ShapeRun> runs;
  for (const auto& g : r.shapes) runs.emplace_back(g, gen);
  const int kinds = bf16 ? kKinds : kOnednnBf16;
  for (auto& run : runs) { // warm-up: primitives created, buffers touched
    for (int k = 0; k < kinds; ++k) run.run(static_cast<Kind>(k));
    const auto& g = run.g;
    r.impl_f32.push_back(blas::onednn_implementation(blas::GemmInputs::f32, g.ta, g.tb, g.m, g.n, g.k, run.lda, run.ldb, run.ldc));
    r.impl_bf16.push_back(bf16 ? blas::onednn_implementation(blas::GemmInputs::bf16, g.ta, g.tb, g.m, g.n, g.k, run.lda,
                                                             run.ldb, run.ldc)
                               : "-");
  }
  std::vector<std::array<std::vector<double>, kKinds>> samples(runs.size());
  for (int round = 0; round < o.rounds; ++round)
    for (std::size_t s = 0; s < runs.size(); ++s)
      for (int k = 0; k < kinds; ++k) // kinds interleaved, each shape in turn
        samples[s][static_cast<std::size_t>(k)].push_back(
            time_per_call([&] { runs[s].run(static_cast<Kind>(k)); }, o.seconds));
  r.seconds.resize(runs.size());
  for (int k = 0; k < kKinds; ++k) {
    double t_all = 0, f_all = 0, t_lin = 0, f_lin = 0;
    for (std::size_t s = 0; s < runs.size(); ++s) {
      const double t = k < kinds ? bench::median(samples[s][static_cast<std::size_t>(k)]) : 0;
      r.seconds[s][static_cast<std::size_t>(k)] = t;
      const double count = static_cast<double>(r.shapes[s].count), flops = r.shapes[s].flops();
      t_all += count * t;
      f_all += count * flops;
      if (r.shapes[s].batch == 1) { // the linear layers' gemms (attention's per-head ones have a batch)
        t_lin += count * t;
        f_lin += count * flops;
      }
    }
    r.mix_all[static_cast<std::size_t>(k)] = t_all > 0 ? f_all / t_all * 1e-9 : 0;
    r.mix_linear[static_cast<std::size_t>(k)] = t_lin > 0 ? f_lin / t_lin * 1e-9 : 0;
  }
  return r;
}

std::string ratio(double x, double base) { return base > 0 && x > 0 ? fmt::format("{:.0f} ({:.2f})", x, x / base) : "-"; }

void print_config(const ConfigResult& r) {
  fmt::print("\n## {} ({}): {} gemm shapes, {:.2f} GFLOP per training step\n\n", r.name, r.shape_str, r.shapes.size(),
             r.step_gflop);
  fmt::print("| shape | used for | per step | {} | {} | {} | {} | oneDNN kernel f32 / bf16 |\n", kKindNames[0],
             kKindNames[1], kKindNames[2], kKindNames[3]);
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (std::size_t s = 0; s < r.shapes.size(); ++s) {
    const auto& g = r.shapes[s];
    std::array<double, kKinds> gf{};
    for (int k = 0; k < kKinds; ++k) {
      const double t = r.seconds[s][static_cast<std::size_t>(k)];
      gf[static_cast<std::size_t>(k)] = t > 0 ? g.flops() / t * 1e-9 : 0;
    }
    fmt::print("| {} | {} | {} | {:.0f} | {} | {} | {} | {} / {} |\n", g.str(), g.what, g.count, gf[0], ratio(gf[1], gf[0]),
               ratio(gf[2], gf[0]), ratio(gf[3], gf[0]), r.impl_f32[s], r.impl_bf16[s]);
  }
  fmt::print("| **linear layers' mix** | | | {:.0f} | {} | {} | {} | |\n", r.mix_linear[0],
             ratio(r.mix_linear[1], r.mix_linear[0]), ratio(r.mix_linear[2], r.mix_linear[0]),
             ratio(r.mix_linear[3], r.mix_linear[0]));
  fmt::print("| **all the step's gemms** | | | {:.0f} | {} | {} | {} | |\n", r.mix_all[0], ratio(r.mix_all[1], r.mix_all[0]),
             ratio(r.mix_all[2], r.mix_all[0]), ratio(r.mix_all[3], r.mix_all[0]));
}

// What one call costs with its primitive (a) created from nothing (oneDNN's own primitive cache
// emptied too: the kernel is compiled), (b) found in oneDNN's cache but not in ours (a primitive
// descriptor is still made: what calling oneDNN without a cache of our own costs), (c) in our
// cache. Medians over `reps`, for the shapes of one configuration.
struct CreationCost {
  std::string shape;
  double created_us, library_cached_us, cached_us;
};
std::vector<CreationCost> measure_creation(const train::RunConfig& c, bool bf16, int reps) {
  std::vector<CreationCost> out;
  Generator gen(99);
  for (const auto& g : bench::model_gemm_shapes(c)) {
    if (g.batch != 1) continue;
    bench::GemmShape one = g;
    ShapeRun run(one, gen);
    const Kind kind = bf16 ? kOnednnBf16 : kOnednnF32;
    std::vector<double> created, lib, cached;
    for (int i = 0; i < reps; ++i) {
      blas::onednn_clear_cache(true);
      double t0 = bench::now_seconds();
      run.run(kind);
      created.push_back(bench::now_seconds() - t0);
      blas::onednn_clear_cache(false);
      t0 = bench::now_seconds();
      run.run(kind);
      lib.push_back(bench::now_seconds() - t0);
      t0 = bench::now_seconds();
      run.run(kind);
      cached.push_back(bench::now_seconds() - t0);
    }
    out.push_back({g.str(), bench::median(created) * 1e6, bench::median(lib) * 1e6, bench::median(cached) * 1e6});
  }
  return out;
}

// to_bf16 over n floats (in cache: the operands of one gemm), ns per element, on the active
// instruction set.
double conversion_ns(std::int64_t n, double seconds) {
  std::vector<float> in(static_cast<std::size_t>(n));
  Generator gen(5);
  for (auto& x : in) x = static_cast<float>(gen.normal());
  std::vector<bf16> out(in.size());
  std::vector<double> t;
  for (int i = 0; i < 5; ++i)
    t.push_back(time_per_call([&] { blas::to_bf16(out.data(), in.data(), n); }, seconds));
  return bench::median(t) / static_cast<double>(n) * 1e9;
}

} // namespace

int main(int argc, char** argv) {
  runtime::configure(argc, argv);
  try {
    const Options o = parse(argc, argv);
    runtime::set_threads(1); // one OpenMP thread, one BLAS thread: single-thread figures
    const std::string load_before = loadavg();
    const blas::Bf16Cpu cpu = blas::bf16_cpu();
    const bool bf16 = blas::bf16_supported();
    fmt::print("# headgrad_gemm_bench: single-thread GFLOP/s of the training steps' gemms\n\n");
    fmt::print("CPU: {}; avx512_bf16 {}, amx_bf16 {}; oneDNN ISA {}; OpenBLAS core {}\n", runtime::cpu_model(),
               cpu.avx512_bf16 ? "yes" : "no", cpu.amx_bf16 ? "yes" : "no", cpu.onednn_isa, runtime::blas_info().core);
    if (!bf16) fmt::print("bf16: {} (bf16 columns skipped)\n", blas::bf16_missing());
    fmt::print("medians of {} interleaved rounds, >= {} s of calls per figure; ratio to OpenBLAS in brackets\n",
               o.rounds, o.seconds);
    fmt::print("load average before: {}\n", load_before);

    std::vector<std::pair<std::string, train::RunConfig>> configs;
    if (o.config == "all" || o.config == "text") configs.emplace_back("text LM", text_config());
    if (o.config == "all" || o.config == "small") configs.emplace_back("small toy", bench::small_config({}).run);
    if (o.config == "all" || o.config == "large") configs.emplace_back("large toy", bench::large_config({}).run);
    std::vector<ConfigResult> results;
    for (const auto& [name, c] : configs) {
      results.push_back(measure_config(name, c, o, bf16));
      print_config(results.back());
    }

    const train::RunConfig& first = configs.front().second;
    fmt::print("\n## what a call costs besides the gemm without a cache of primitives ({} shapes, linear layers), "
               "microseconds, medians of 5 single calls\n\n",
               configs.front().first);
    fmt::print("| shape | kind | the call, primitive cached here | + creating the primitive (kernel compiled) | + a "
               "primitive descriptor (oneDNN's own cache hit) |\n");
    fmt::print("|---|---|---|---|---|\n");
    for (bool b : {false, true}) {
      if (b && !bf16) continue;
      for (const auto& x : measure_creation(first, b, 5))
        fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.0f} |\n", x.shape, b ? "bf16" : "f32", x.cached_us,
                   x.created_us - x.cached_us, x.library_cached_us - x.cached_us);
    }

    fmt::print("\n## float32 -> bf16 conversion (to_bf16), ns per element, in cache\n\n");
    fmt::print("| elements | avx512 | baseline (scalar) |\n|---|---|---|\n");
    const runtime::Isa active = runtime::active_isa();
    for (std::int64_t n : {std::int64_t{128 * 128}, std::int64_t{768 * 128}, std::int64_t{768 * 512}}) {
      double wide = 0;
      if (runtime::cpu_isa() == runtime::Isa::avx512) {
        runtime::set_isa(runtime::Isa::avx512);
        wide = conversion_ns(n, o.seconds);
      }
      runtime::set_isa(runtime::Isa::baseline);
      const double scalar = conversion_ns(n, o.seconds);
      runtime::set_isa(active);
      fmt::print("| {} | {} | {:.2f} |\n", n, wide > 0 ? fmt::format("{:.3f}", wide) : "-", scalar);
    }
    fmt::print("\nload average after: {}\n", loadavg());
    const blas::OnednnCacheStats st = blas::onednn_cache_stats();
    fmt::print("oneDNN primitives created {}, calls that reused one {}\n", st.created, st.reused);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headgrad_gemm_bench: %s\n", e.what());
    return 2;
  }
}
