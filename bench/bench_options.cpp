#include "bench/bench_options.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <sstream>

#include "framework/engine/runtime/threads.hpp"
#include "train/cli/run_config_flags.hpp"
#include "train/loop/trainer.hpp"

#ifndef HEADGRAD_BENCH_SOURCE_DIR
#define HEADGRAD_BENCH_SOURCE_DIR "bench"
#endif

namespace headgrad::bench {
namespace {

using cli::CliError;
using cli::Kind;
using json = nlohmann::json;

// For the table and the JSON: which training settings came from a flag, which are the default.
json settings_source(const cli::Args& args) {
  json source = json::object();
  train::visit_run_fields([&](const train::FieldInfo& f, auto) {
    if (cli::selected(cli::RunFields::settings, f))
      source[f.flag] = args.given(f.flag) ? "flag" : "headgrad train default";
  });
  return source;
}

// --configs small,large,long (or none)
std::vector<BenchConfig> configs_from(const std::string& list, const train::RunConfig& settings) {
  std::vector<BenchConfig> configs;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty() && item != "none") {
      try {
        configs.push_back(config_by_name(item, settings));
      } catch (const std::invalid_argument& e) {
        throw CliError(fmt::format("--configs: {}", e.what()));
      }
    }
  return configs;
}

} // namespace

std::vector<cli::FlagSpec> bench_flags() {
  const std::string cores = std::to_string(runtime::available_cores());
  std::vector<cli::FlagSpec> flags = {
      {"threads", Kind::integer, cores,
       "threads for both sides (BLAS + OpenMP; torch.set_num_threads); throughput is also timed at 1 thread"},
      {"configs", Kind::text, "small,large,long", "configurations to time: small, large, long (comma-separated) or none",
       "LIST"},
      {"warmup-steps", Kind::integer, "10", "untimed steps before the timed windows"},
      {"windows", Kind::integer, "5", "timed windows; the median window gives ms/step"},
      {"window-steps", Kind::integer, "20", "steps per timed window"},
      {"profile-steps", Kind::integer, "10", "extra headgrad steps under the op profiler (0: no profile)"},
      {"sgemm-seconds", Kind::real, "0.2", "seconds spent timing cblas_sgemm on each model gemm shape"},
      {"skip-tta", Kind::flag, "false", "skip time-to-accuracy (the slow part: minutes)"},
      {"tta-target", Kind::real, "0.99", "held-out sequence accuracy to reach"},
      {"tta-eval-every", Kind::integer, "50", "evaluate the held-out set every N steps during time-to-accuracy"},
      {"tta-max-steps", Kind::integer, "", "give up after N steps (default: --steps)"},
      {"eval-count", Kind::integer, std::to_string(train::TrainOptions{}.eval_count), "held-out sequences (as headgrad train)"},
      {"skip-soak", Kind::flag, "false", "skip the RSS-growth soak run"},
      {"soak-steps", Kind::integer, "5000", "soak length; RSS growth is measured from step 100 to this"},
      {"no-torch", Kind::flag, "false", "headgrad only, even if PyTorch is installed"},
      {"python", Kind::text, "/usr/bin/python3", "the Python with torch", "PATH"},
      {"torch-omp-wait-policy", Kind::text, "PASSIVE",
       "PyTorch's OMP_WAIT_POLICY: a value, same (as headgrad), or user (as started)", "POLICY"},
      {"torch-script", Kind::text, HEADGRAD_BENCH_SOURCE_DIR "/torch_reference.py", "the PyTorch side", "PATH"},
      {"quick", Kind::flag, "false", "smoke run: a few steps per window, short soak and time-to-accuracy"},
      {"json", Kind::flag, "false", "print the results as one JSON object on the last line"},
      {"json-file", Kind::text, "", "also write that JSON to this file", "FILE"},
      {"keep-tmp", Kind::flag, "false", "keep the temp directory with the exported weights, batches and results"},
      {"attention-sweep", Kind::flag, "false",
       "only time the fused attention's two algorithms (keep-P, flash) over sequence lengths"},
      {"text-limit", Kind::text, "",
       "only time cblas_sgemm on the gemm mix of the text run whose checkpoint is FILE (its shapes and "
       "vocabulary) at --threads, for --sgemm-seconds per shape; prints one JSON line (./dev.sh bench text uses it)",
       "FILE"},
  };
  // the training settings: default = headgrad train's (RunConfig's initialisers)
  for (cli::FlagSpec& f : cli::run_config_flags(cli::RunFields::settings)) flags.push_back(std::move(f));
  return flags;
}

BenchOptions bench_options(const cli::Args& args) {
  BenchOptions o;
  o.quick = args.flag("quick");
  // a flag's value, or with --quick and the flag not given, the quick run's
  auto int_or = [&](const char* flag, std::int64_t quick_value, std::int64_t min) {
    const std::int64_t v = o.quick && !args.given(flag) ? quick_value : args.integer(flag);
    if (v < min) throw CliError(fmt::format("--{} must be at least {}, got {}", flag, min, v));
    return v;
  };
  o.threads = static_cast<int>(args.integer_at_least("threads", 1));
  o.warmup_steps = int_or("warmup-steps", 2, 1);
  o.windows = int_or("windows", 3, 1);
  o.window_steps = int_or("window-steps", 3, 1);
  o.profile_steps = int_or("profile-steps", 2, 0);
  o.tta_eval_every = args.integer_at_least("tta-eval-every", 1);
  o.eval_count = args.integer_at_least("eval-count", 1);
  o.soak_steps = int_or("soak-steps", 300, 101);
  o.sgemm_seconds = o.quick && !args.given("sgemm-seconds") ? 0.005 : args.real("sgemm-seconds");
  o.tta_target = args.real("tta-target");
  o.settings = cli::run_config_from_flags(args, cli::RunFields::settings);
  try {
    train::check_precision(o.settings); // --precision bf16 where it runs (one line otherwise)
  } catch (const std::invalid_argument& e) {
    throw CliError(e.what());
  }
  o.settings_source = settings_source(args);
  o.configs = configs_from(args.text("configs"), o.settings);
  const std::int64_t all_steps = o.quick ? std::min<std::int64_t>(o.settings.steps, 50) : o.settings.steps;
  o.tta_max_steps = args.given("tta-max-steps") ? args.integer_at_least("tta-max-steps", 1) : all_steps;
  o.tta = !args.flag("skip-tta");
  o.soak = !args.flag("skip-soak");
  o.no_torch = args.flag("no-torch");
  o.python = args.text("python");
  o.torch_script = args.text("torch-script");
  o.torch_omp_wait_policy = args.text("torch-omp-wait-policy");
  if (o.torch_omp_wait_policy.empty()) throw CliError("--torch-omp-wait-policy needs same, user or a value");
  o.json = args.flag("json");
  o.json_file = args.text("json-file");
  o.keep_tmp = args.flag("keep-tmp");
  return o;
}

} // namespace headgrad::bench
