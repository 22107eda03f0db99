// bench_main.cpp - `headgrad_bench` (./dev.sh bench): headgrad against PyTorch on the same model,
// weights, batches and optimiser, printed side by side in one table (and as JSON with --json).
//
//   headgrad_bench [--threads N] [--quick] [--skip-tta] [--skip-soak] [--no-torch] [--json]
//   headgrad_bench --text-limit CHECKPOINT [--threads N]   (the text run's sgemm limit, for bench/text_lm.py)
//
// What it measures (each in a fresh child process, so peak RSS figures don't mix):
//   - throughput of `models::SequenceModel` on the sort task, configs small (the default
//     `headgrad train` run) and large: ms/step as the median over timed windows after warm-up
//     steps, tokens/s (B x T padded positions per second, as the trainer reports), achieved
//     GFLOP/s from the FLOP model in flop_model.hpp, the best cblas_sgemm GFLOP/s on the model's
//     own gemm shapes measured in the same process (the practical ceiling), peak RSS (VmHWM), the
//     first step's loss (must match PyTorch's: a cross-check that both run the same thing), and a
//     profile of where headgrad's step time goes;
//   - time to held-out sequence accuracy >= 0.99 on the small config, with `headgrad train`'s
//     training defaults (train::RunConfig's initialisers, overridden by the bench's flags),
//     evaluating every --tta-eval-every steps; evaluation time excluded;
//   - RSS growth from step 100 to step 5000 of the small config (headgrad only).
// The PyTorch side is bench/torch_reference.py, run with /usr/bin/python3 when `import torch`
// works, given the same threads, the initial weights and the batches through a temp directory.
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/attention_sweep.hpp"
#include "bench/bench_child.hpp"
#include "bench/bench_options.hpp"
#include "bench/bench_runner.hpp"
#include "bench/bench_table.hpp"
#include "bench/flop_model.hpp"
#include "bench/result_json.hpp"
#include "bench/run_config_json.hpp"
#include "bench/text_limit.hpp"
#include "bench/timing.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/runtime/threads.hpp"

namespace headgrad::bench {
namespace {

using json = nlohmann::json;

// The 1-minute load average: above the core count, other work shares the cores and every timing
// here is inflated (BLAS and OpenMP threads that spin-wait suffer most).
double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = NAN;
  f >> l;
  return l;
}

// A configuration's shape and name, as the spec and the results hold it.
json config_json(const BenchConfig& c) {
  json j = shape_json(c.run);
  j["name"] = c.name;
  return j;
}

// What this run is: threads, headgrad's BLAS and wait policy, PyTorch, settings, timing.
json describe_run(const BenchOptions& o, const Runner& runner) {
  const auto blas = runtime::blas_info();
  const char* omp_policy = std::getenv("OMP_WAIT_POLICY");
  json result;
  result["threads"] = o.threads;
  result["cores"] = runtime::available_cores();
  result["cpu"] = {{"model", runtime::cpu_model()},
                   {"features", runtime::cpu_features().str()},
                   {"onednn", blas::onednn_summary()},
                   {"bf16", blas::bf16_supported() ? "available" : blas::bf16_missing()}};
  result["quick"] = o.quick;
  result["headgrad"] = {{"openblas_core", blas.core},
                        {"openblas_config", blas.config},
                        {"omp_wait_policy", omp_policy ? omp_policy : "(unset)"}};
  result["torch"] = runner.torch_info();
  result["train"] = settings_json(o.settings);
  result["train"]["source"] = o.settings_source;
  result["flop_formula"] = kFlopFormula;
  result["timing"] = {{"warmup_steps", o.warmup_steps}, {"windows", o.windows}, {"window_steps", o.window_steps}};
  return result;
}

// Timing of a configuration: heavy steps (the long config's ~90 GFLOP) get fewer of them.
json throughput_spec(const BenchOptions& o, const BenchConfig& c, bool with_profile) {
  const bool heavy = step_flops(c.run) > 2e10;
  return {{"mode", "throughput"},
          {"config", config_json(c)},
          {"train", settings_json(c.run)},
          {"warmup_steps", heavy ? 1 : o.warmup_steps},
          {"windows", heavy ? std::min<std::int64_t>(o.windows, 3) : o.windows},
          {"window_steps", heavy ? 1 : o.window_steps},
          {"profile_steps", with_profile ? (heavy ? std::min<std::int64_t>(o.profile_steps, 1) : o.profile_steps) : 0},
          {"sgemm_seconds", with_profile ? o.sgemm_seconds : 0.0},
          {"step_flops", step_flops(c.run)}};
}

// Throughput of one configuration into result["configs"][name]: both sides at --threads threads
// ("headgrad", "torch", with headgrad's profile and the sgemm limit) and at one thread
// ("headgrad_1", "torch_1"), so each side can be compared at its best thread count.
void measure_throughput(const BenchOptions& o, Runner& runner, const BenchConfig& c, json& result) {
  // The FLOP formula and the gemm list the sgemm limit is measured on must describe the same step.
  check_flop_model(c.run, c.name);
  const json spec = throughput_spec(o, c, true);
  const std::int64_t batches = spec["warmup_steps"].get<std::int64_t>() +
                               spec["windows"].get<std::int64_t>() * spec["window_steps"].get<std::int64_t>() +
                               spec["profile_steps"].get<std::int64_t>();
  fmt::print(stderr, "bench: {} ({}): exporting weights and {} batches\n", c.name, c.str(), batches);
  export_inputs(runner.dir(), c.name, c.run, batches, 0);
  json& r = result["configs"][c.name];
  r["shape"] = config_json(c);
  r["flops_per_step"] = step_flops(c.run);
  fmt::print(stderr, "bench: {}: timing headgrad{} at {} threads\n", c.name, runner.torch() ? " and PyTorch" : "",
             o.threads);
  auto [hg, pt] = runner.run(spec, c.name, true);
  r["headgrad"] = hg;
  r["torch"] = runner.torch() ? pt : json(nullptr);
  if (o.threads > 1) {
    fmt::print(stderr, "bench: {}: timing both at 1 thread\n", c.name);
    auto [hg1, pt1] = runner.run(throughput_spec(o, c, false), c.name + ".t1", true, 1, c.name);
    r["headgrad_1"] = hg1;
    r["torch_1"] = runner.torch() ? pt1 : json(nullptr);
  }
  for (const auto& [who, j] : {std::pair<const char*, const json*>{"headgrad", &r["headgrad"]}, {"PyTorch", &r["torch"]}})
    if (has(*j, "error")) fmt::print(stderr, "bench: {}: {} failed: {}\n", c.name, who, (*j)["error"].get<std::string>());
  if (has(pt, "blas")) result["torch"]["blas"] = pt["blas"];
}

// Time to the held-out accuracy target on the small configuration, both sides.
void measure_time_to_accuracy(const BenchOptions& o, Runner& runner, json& result) {
  const BenchConfig c = small_config(o.settings);
  fmt::print(stderr, "bench: time to {} held-out seq acc, {} (at most {} steps, eval every {})\n", o.tta_target,
             c.str(), o.tta_max_steps, o.tta_eval_every);
  export_inputs(runner.dir(), "tta", c.run, o.tta_max_steps, o.eval_count);
  const json spec = {{"mode", "tta"},          {"config", config_json(c)},    {"train", settings_json(c.run)},
                     {"eval_every", o.tta_eval_every}, {"eval_count", o.eval_count}, {"target", o.tta_target},
                     {"max_steps", o.tta_max_steps},   {"step_flops", step_flops(c.run)}};
  auto [hg, pt] = runner.run(spec, "tta", true);
  result["time_to_accuracy"] = {{"config", c.name},           {"target", o.tta_target},
                                {"eval_every", o.tta_eval_every}, {"max_steps", o.tta_max_steps},
                                {"headgrad", hg},             {"torch", runner.torch() ? pt : json(nullptr)}};
}

// RSS growth of the small configuration over a long run (headgrad only).
void measure_soak(const BenchOptions& o, Runner& runner, json& result) {
  const BenchConfig c = small_config(o.settings);
  fmt::print(stderr, "bench: soak: {} steps of {}, RSS at step 100 and {}\n", o.soak_steps, c.str(), o.soak_steps);
  const json spec = {{"mode", "soak"},          {"config", config_json(c)}, {"train", settings_json(c.run)},
                     {"soak_steps", o.soak_steps}, {"soak_baseline_step", 100}};
  result["soak"] = runner.run(spec, "soak", false).first;
}

// The table on stdout; the JSON to --json-file and, with --json, as the last stdout line.
void report(const BenchOptions& o, json& result) {
  fmt::print("{}", render_table(o, result));
  if (!o.json_file.empty()) {
    std::ofstream f(o.json_file);
    f << result.dump(1) << "\n";
    if (!f) throw std::runtime_error(fmt::format("{}: cannot write", o.json_file));
  }
  if (o.json) fmt::print("{}\n", result.dump());
  std::fflush(stdout);
}

int run(int argc, char** argv) {
  cli::Args args("bench", bench_flags());
  args.parse(argc, argv, 1);
  if (args.help()) {
    fmt::print("usage: headgrad_bench [flags]   (./dev.sh bench [flags])\n\nheadgrad against PyTorch on the reference "
               "model: throughput, achieved GFLOP/s against the cblas_sgemm\nlimit, peak RSS, time to 0.99 held-out "
               "accuracy and RSS growth; one table, JSON with --json.\n\nflags:\n{}",
               args.usage());
    return 0;
  }
  if (args.flag("attention-sweep")) {
    run_attention_sweep(static_cast<int>(args.integer_at_least("threads", 1)));
    return 0;
  }
  if (!args.text("text-limit").empty()) {
    run_text_limit(args.text("text-limit"), static_cast<int>(args.integer_at_least("threads", 1)),
                   args.real("sgemm-seconds"));
    return 0;
  }
  const double wall0 = now_seconds(), load_start = load_average();
  const BenchOptions o = bench_options(args);
  runtime::set_threads(o.threads);
  Runner runner(o);
  fmt::print(stderr, "bench: {} threads, OpenBLAS core {}, PyTorch {}; training settings: {}\n", o.threads,
             runtime::blas_info().core, runner.torch_summary(), settings_summary(o.settings));
  json result = describe_run(o, runner);
  result["load_average_start"] = load_start;
  for (const auto& c : o.configs) measure_throughput(o, runner, c, result);
  if (o.tta) measure_time_to_accuracy(o, runner, result);
  if (o.soak) measure_soak(o, runner, result);
  result["load_average_end"] = load_average();
  result["wall_seconds"] = now_seconds() - wall0;
  report(o, result);
  return 0;
}

} // namespace
} // namespace headgrad::bench

int main(int argc, char** argv) {
  // headgrad's runtime may re-execute the program with OMP_WAIT_POLICY / OPENBLAS_CORETYPE set
  // for itself. Remember what the user had, so PyTorch runs in the user's environment.
  if (!std::getenv("HEADGRAD_REEXECED") && !std::getenv(headgrad::bench::kUserOmpPolicyVar)) {
    const char* user = std::getenv("OMP_WAIT_POLICY");
    setenv(headgrad::bench::kUserOmpPolicyVar, user ? user : "", 1);
  }
  headgrad::runtime::configure(argc, argv);
  try {
    if (argc == 3 && std::string(argv[1]) == "--child") return headgrad::bench::run_child(argv[2]);
    return headgrad::bench::run(argc, argv);
  } catch (const headgrad::cli::CliError& e) {
    std::fprintf(stderr, "headgrad_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headgrad_bench: %s\n", e.what());
    return 1;
  }
}
