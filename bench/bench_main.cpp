// bench_main.cpp - `headgrad_bench` (./dev.sh bench): headgrad against PyTorch on the same model,
// weights, batches and optimiser, printed side by side in one table (and as JSON with --json).
//
//   headgrad_bench [--threads N] [--quick] [--skip-tta] [--skip-soak] [--no-torch] [--json]
//
// What it measures (each in a fresh child process, so peak RSS figures don't mix):
//   - throughput of `models::SequenceModel` on the sort task, configs small (the default
//     `headgrad train` run) and large: ms/step as the median over timed windows after warm-up
//     steps, tokens/s (B x T padded positions per second, as the trainer reports), achieved
//     GFLOP/s from the FLOP model in bench_common.hpp, the best cblas_sgemm GFLOP/s on the model's
//     own gemm shapes measured in the same process (the practical ceiling), peak RSS (VmHWM), the
//     first step's loss (must match PyTorch's: a cross-check that both run the same thing), and a
//     profile of where headgrad's step time goes;
//   - time to held-out sequence accuracy >= 0.99 on the small config, with `headgrad train`'s
//     training defaults (train::RunConfig's initialisers, overridden by the bench's flags),
//     evaluating every --tta-eval-every steps; evaluation time excluded;
//   - RSS growth from step 100 to step 5000 of the small config (headgrad only).
// The PyTorch side is bench/torch_reference.py, run with /usr/bin/python3 when `import torch`
// works, given the same threads, the initial weights and the batches through a temp directory.
#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "bench/bench_child.hpp"
#include "bench/run_config_json.hpp"
#include "framework/runtime/threads.hpp"
#include "train/cli/blas_core.hpp"
#include "train/cli/cli_args.hpp"
#include "train/cli/run_config_flags.hpp"

#ifndef HEADGRAD_BENCH_SOURCE_DIR
#define HEADGRAD_BENCH_SOURCE_DIR "bench"
#endif

namespace headgrad::bench {
// The OMP_WAIT_POLICY the user started the bench with ("" = unset), carried across the re-exec.
inline constexpr const char* kUserOmpPolicyVar = "HEADGRAD_BENCH_USER_OMP_WAIT_POLICY";

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using cli::CliError;
using cli::Kind;

std::vector<cli::FlagSpec> bench_flags() {
  const std::string cores = std::to_string(runtime::available_cores());
  std::vector<cli::FlagSpec> flags = {
      {"threads", Kind::integer, cores, "threads for both sides (BLAS + OpenMP; torch.set_num_threads)"},
      {"configs", Kind::text, "small,large", "configurations to time: small, large, both or none", "LIST"},
      {"warmup-steps", Kind::integer, "10", "untimed steps before the timed windows"},
      {"windows", Kind::integer, "5", "timed windows; the median window gives ms/step"},
      {"window-steps", Kind::integer, "20", "steps per timed window"},
      {"profile-steps", Kind::integer, "10", "extra headgrad steps under the op profiler (0: no profile)"},
      {"sgemm-seconds", Kind::real, "0.2", "seconds spent timing cblas_sgemm on each model gemm shape"},
      {"skip-tta", Kind::flag, "false", "skip time-to-accuracy (the slow part: minutes)"},
      {"tta-target", Kind::real, "0.99", "held-out sequence accuracy to reach"},
      {"tta-eval-every", Kind::integer, "50", "evaluate the held-out set every N steps during time-to-accuracy"},
      {"tta-max-steps", Kind::integer, "", "give up after N steps (default: --steps)"},
      {"eval-count", Kind::integer, "1000", "held-out sequences (as headgrad train)"},
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
  };
  // the training settings: default = headgrad train's (RunConfig's initialisers)
  for (cli::FlagSpec& f : cli::run_config_flags(cli::RunFields::settings)) flags.push_back(std::move(f));
  return flags;
}

// The 1-minute load average: above the core count, other work shares the cores and every timing
// here is inflated (BLAS and OpenMP threads that spin-wait suffer most).
double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = NAN;
  f >> l;
  return l;
}

// For the table and the JSON: which training settings came from a flag, which are the default.
json settings_source(const cli::Args& args) {
  json source = json::object();
  train::visit_run_fields([&](const train::FieldInfo& f, auto) {
    if (f.role != train::Role::shape) source[f.flag] = args.given(f.flag) ? "flag" : "headgrad train default";
  });
  return source;
}

// A configuration's shape and name, as the spec and the results hold it.
json config_json(const BenchConfig& c) {
  json j = shape_json(c.run);
  j["name"] = c.name;
  return j;
}

std::optional<json> read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  try {
    json j;
    f >> j;
    return j;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// The OMP_WAIT_POLICY the PyTorch process runs with (nullopt: unset, libgomp's default).
//   PASSIVE (the default) - PyTorch's best here: its gemms run on OpenBLAS's own threads, and
//           libgomp threads spinning after each parallel region starve them (measured: small
//           config at 2 threads 1.4 s/step with libgomp's default vs 62 ms/step with PASSIVE, on
//           a busy machine)
//   same  - what headgrad runs with
//   user  - what the bench was started with
//   other - that value
std::string g_torch_omp_policy = "PASSIVE";
std::optional<std::string> torch_omp_wait_policy() {
  const char* v = nullptr;
  if (g_torch_omp_policy == "same") v = std::getenv("OMP_WAIT_POLICY");
  else if (g_torch_omp_policy == "user") v = std::getenv(kUserOmpPolicyVar);
  else return g_torch_omp_policy;
  if (v && *v) return std::string(v);
  return std::nullopt;
}

struct Runner {
  fs::path dir;
  int threads;
  bool torch = false;
  std::string python, script;

  // Runs the headgrad child and (if torch) the PyTorch script on the spec; returns both results.
  std::pair<json, json> run(json spec, const std::string& tag, bool with_torch) {
    const fs::path spec_path = dir / (tag + ".spec.json");
    spec["threads"] = threads;
    spec["weights"] = (dir / (tag + ".weights.safetensors")).string();
    spec["data"] = (dir / (tag + ".data.safetensors")).string();
    spec["result_headgrad"] = (dir / (tag + ".headgrad.json")).string();
    spec["result_torch"] = (dir / (tag + ".torch.json")).string();
    {
      std::ofstream f(spec_path);
      f << spec.dump(1) << "\n";
    }
    json hg, pt;
    // /proc/self/exe: exactly this binary, even if a rebuild has replaced the file meanwhile
    const int rc = run_process({"/proc/self/exe", "--child", spec_path.string()}, {});
    auto r = read_json(spec["result_headgrad"].get<std::string>());
    if (rc != 0 || !r) hg = {{"error", fmt::format("headgrad child exited with {}", rc)}};
    else hg = *r;
    if (with_torch && torch) {
      const std::string n = std::to_string(threads);
      const int prc = run_process({python, script, spec_path.string()}, {{"OMP_NUM_THREADS", n},
                                                                          {"OPENBLAS_NUM_THREADS", n},
                                                                          {"MKL_NUM_THREADS", n},
                                                                          {"OMP_WAIT_POLICY", torch_omp_wait_policy()}});
      auto p = read_json(spec["result_torch"].get<std::string>());
      if (prc != 0 || !p) pt = {{"error", fmt::format("{} {} exited with {}", python, script, prc)}};
      else pt = *p;
    }
    return {hg, pt};
  }
};

bool has(const json& j, const char* key) { return j.is_object() && j.contains(key) && !j[key].is_null(); }

double num(const json& j, const char* key) { return has(j, key) ? j[key].get<double>() : NAN; }

std::string fmt_num(double x, int prec = 1) {
  if (!std::isfinite(x)) return "-";
  return fmt::format("{:.{}f}", x, prec);
}

std::string fmt_si(double x) {
  if (!std::isfinite(x)) return "-";
  if (std::abs(x) >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (std::abs(x) >= 1e3) return fmt::format("{:.1f}k", x / 1e3);
  return fmt::format("{:.0f}", x);
}

std::string fmt_pct(double x) { return std::isfinite(x) ? fmt::format("{:.0f}%", 100 * x) : "-"; }

std::string fmt_ratio(double x) { return std::isfinite(x) ? fmt::format("{:.2f}x", x) : "-"; }

struct Table {
  std::string out;
  void section(const std::string& s) { out += s + "\n"; }
  void row(const std::string& metric, const std::string& hg, const std::string& pt, const std::string& ratio,
           const std::string& target = "", const std::string& status = "") {
    out += fmt::format("  {:<36} {:>11} {:>11} {:>9}   {:<22} {}\n", metric, hg, pt, ratio, target, status);
  }
};

std::string status_of(const std::optional<bool>& met) { return !met ? "n/a" : *met ? "ok" : "MISS"; }

std::optional<bool> check(double value, double bound, bool at_least) {
  if (!std::isfinite(value)) return std::nullopt;
  return at_least ? value >= bound : value <= bound;
}

void add_target(json& targets, const std::string& name, double value, const std::string& target,
                const std::optional<bool>& met) {
  targets.push_back({{"name", name},
                     {"value", std::isfinite(value) ? json(value) : json(nullptr)},
                     {"target", target},
                     {"met", met ? json(*met) : json(nullptr)}});
}

std::string profile_summary(const std::string& name, const json& hg) {
  if (!has(hg, "profile")) return "";
  const json& p = hg["profile"];
  const json& ph = p["phases_ms"];
  std::string s = fmt::format(
      "headgrad {} profile ({} steps, {:.2f} ms/step with the profiler on): batch {:.2f} + forward {:.2f} + backward "
      "{:.2f} + clip {:.2f} + optimizer {:.2f} ms\n",
      name, p["steps"].get<int>(), p["ms_per_step"].get<double>(), ph["batch"].get<double>(), ph["forward"].get<double>(),
      ph["backward"].get<double>(), ph["clip"].get<double>(), ph["optimizer"].get<double>());
  const double op_total = p["op_ms_per_step"];
  s += fmt::format("  ops, share of the {:.2f} ms/step spent in ops (fwd+bwd ms/step):", op_total);
  int shown = 0;
  for (const auto& o : p["ops"]) {
    if (shown++ == 7) break;
    const double f = o["fwd_ms"], b = o["bwd_ms"];
    s += fmt::format(" {} {:.0f}% ({:.2f}+{:.2f});", o["op"].get<std::string>(),
                     op_total > 0 ? 100 * (f + b) / op_total : 0.0, f, b);
  }
  s.back() = '\n';
  if (has(hg, "sgemm")) {
    const json& g = hg["sgemm"];
    s += fmt::format("  all of the step's gemms at the measured sgemm speeds: {:.2f} ms/step (mix {:.1f} GFLOP/s; best "
                     "shape {} at {:.1f} GFLOP/s)\n",
                     g["matmul_ms_per_step"].get<double>(), g["mix_gflops"].get<double>(),
                     g["best_shape"].get<std::string>(), g["best_gflops"].get<double>());
  }
  return s;
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
  const double wall0 = now_seconds();
  const double load_start = load_average();
  const bool quick = args.flag("quick");
  auto int_or = [&](const char* flag, std::int64_t quick_value, std::int64_t min) {
    const std::int64_t v = quick && !args.given(flag) ? quick_value : args.integer(flag);
    if (v < min) throw CliError(fmt::format("--{} must be at least {}, got {}", flag, min, v));
    return v;
  };
  const int threads = static_cast<int>(args.integer_at_least("threads", 1));
  const std::int64_t warm = int_or("warmup-steps", 2, 1), windows = int_or("windows", 3, 1),
                     per = int_or("window-steps", 3, 1), prof = int_or("profile-steps", 2, 0),
                     eval_every = args.integer_at_least("tta-eval-every", 1),
                     eval_count = args.integer_at_least("eval-count", 1),
                     soak_steps = int_or("soak-steps", 300, 101);
  const double sgemm_seconds = quick && !args.given("sgemm-seconds") ? 0.005 : args.real("sgemm-seconds");
  const double tta_target = args.real("tta-target");
  const train::RunConfig settings = cli::run_config_from_flags(args, cli::RunFields::settings);
  const json source = settings_source(args);
  std::vector<BenchConfig> configs;
  {
    std::string list = args.text("configs");
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
  }
  const std::int64_t tta_max = args.given("tta-max-steps") ? args.integer_at_least("tta-max-steps", 1)
                                                            : (quick ? std::min<std::int64_t>(settings.steps, 50) : settings.steps);

  runtime::set_threads(threads);
  const auto blas = runtime::blas_info();

  Runner runner;
  runner.threads = threads;
  runner.python = args.text("python");
  runner.script = args.text("torch-script");
  g_torch_omp_policy = args.text("torch-omp-wait-policy");
  if (g_torch_omp_policy.empty()) throw CliError("--torch-omp-wait-policy needs same, user or a value");
  json torch_info = {{"available", false}};
  if (args.flag("no-torch")) {
    torch_info["reason"] = "--no-torch";
  } else if (access(runner.python.c_str(), X_OK) != 0) {
    torch_info["reason"] = runner.python + " not found";
  } else {
    int code = 0;
    const std::string v =
        capture_process({runner.python, "-c", "import sys, torch; sys.stdout.write(torch.__version__)"}, &code);
    if (code != 0) torch_info["reason"] = fmt::format("{} -c 'import torch' failed", runner.python);
    else if (access(runner.script.c_str(), R_OK) != 0) torch_info["reason"] = runner.script + " not found";
    else {
      runner.torch = true;
      torch_info = {{"available", true}, {"version", v}};
    }
  }

  {
    std::string tmpl = (fs::temp_directory_path() / "headgrad-bench-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error(fmt::format("cannot create {}: {}", tmpl, std::strerror(errno)));
    runner.dir = tmpl;
  }
  const bool keep = args.flag("keep-tmp");
  struct Cleanup {
    fs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
      else fmt::print(stderr, "bench: kept {}\n", dir.string());
    }
  } cleanup{runner.dir, keep};

  fmt::print(stderr, "bench: {} threads, OpenBLAS core {}, PyTorch {}; training settings: {}\n", threads, blas.core,
             runner.torch ? torch_info["version"].get<std::string>() : "off (" + torch_info["reason"].get<std::string>() + ")",
             settings_summary(settings));

  json result;
  result["threads"] = threads;
  result["cores"] = runtime::available_cores();
  result["quick"] = quick;
  result["load_average_start"] = load_start;
  const char* omp_policy = std::getenv("OMP_WAIT_POLICY");
  result["headgrad"] = {{"openblas_core", blas.core},
                        {"openblas_config", blas.config},
                        {"omp_wait_policy", omp_policy ? omp_policy : "(unset)"}};
  torch_info["omp_wait_policy"] = torch_omp_wait_policy().value_or("(unset)");
  result["train"] = settings_json(settings);
  result["train"]["source"] = source;
  result["flop_formula"] = kFlopFormula;
  result["timing"] = {{"warmup_steps", warm}, {"windows", windows}, {"window_steps", per}};
  json targets = json::array();

  // ---- throughput, per config ----
  for (const auto& c : configs) {
    // The FLOP formula and the gemm list the sgemm limit is measured on must describe the same step.
    double listed = 0;
    for (const auto& g : model_gemm_shapes(c.run)) listed += static_cast<double>(g.count) * g.flops();
    if (std::abs(listed - step_flops(c.run)) > 1e-9 * listed)
      throw std::logic_error(fmt::format("FLOP model mismatch for {}: formula {} vs gemm list {}", c.name,
                                         step_flops(c.run), listed));
    fmt::print(stderr, "bench: {} ({}): exporting weights and {} batches\n", c.name, c.str(), warm + windows * per);
    export_inputs(runner.dir.string(), c.name, c.run, warm + windows * per, 0);
    json spec = {{"mode", "throughput"},       {"config", config_json(c)},       {"train", settings_json(settings)},
                 {"warmup_steps", warm},       {"windows", windows},             {"window_steps", per},
                 {"profile_steps", prof},      {"sgemm_seconds", sgemm_seconds}, {"step_flops", step_flops(c.run)}};
    fmt::print(stderr, "bench: {}: timing headgrad{}\n", c.name, runner.torch ? " and PyTorch" : "");
    auto [hg, pt] = runner.run(spec, c.name, true);
    json& r = result["configs"][c.name];
    r["shape"] = config_json(c);
    r["flops_per_step"] = step_flops(c.run);
    r["headgrad"] = hg;
    r["torch"] = runner.torch ? pt : json(nullptr);
    r["ratio"] = {{"tokens_per_s", num(hg, "tokens_per_s") / num(pt, "tokens_per_s")},
                  {"peak_rss", num(hg, "peak_rss_kib") / num(pt, "peak_rss_kib")}};
    if (has(hg, "error")) fmt::print(stderr, "bench: {}: headgrad failed: {}\n", c.name, hg["error"].get<std::string>());
    if (has(pt, "error")) fmt::print(stderr, "bench: {}: PyTorch failed: {}\n", c.name, pt["error"].get<std::string>());
    if (has(pt, "blas")) torch_info["blas"] = pt["blas"];
  }
  result["torch"] = torch_info;

  // ---- time to accuracy (small) ----
  if (!args.flag("skip-tta")) {
    const BenchConfig c = small_config(settings);
    fmt::print(stderr, "bench: time to {} held-out seq acc, {} (at most {} steps, eval every {})\n", tta_target,
               c.str(), tta_max, eval_every);
    export_inputs(runner.dir.string(), "tta", c.run, tta_max, eval_count);
    json spec = {{"mode", "tta"},          {"config", config_json(c)}, {"train", settings_json(settings)},
                 {"eval_every", eval_every}, {"eval_count", eval_count}, {"target", tta_target},
                 {"max_steps", tta_max},     {"step_flops", step_flops(c.run)}};
    auto [hg, pt] = runner.run(spec, "tta", true);
    result["time_to_accuracy"] = {{"config", c.name},        {"target", tta_target}, {"eval_every", eval_every},
                                  {"max_steps", tta_max},    {"headgrad", hg},       {"torch", runner.torch ? pt : json(nullptr)}};
  }

  // ---- soak (small, headgrad only) ----
  if (!args.flag("skip-soak")) {
    const BenchConfig c = small_config(settings);
    fmt::print(stderr, "bench: soak: {} steps of {}, RSS at step 100 and {}\n", soak_steps, c.str(), soak_steps);
    json spec = {{"mode", "soak"}, {"config", config_json(c)}, {"train", settings_json(settings)},
                 {"soak_steps", soak_steps}, {"soak_baseline_step", 100}};
    auto [hg, pt] = runner.run(spec, "soak", false);
    result["soak"] = hg;
  }

  // ---- the table ----
  Table t;
  std::vector<std::string> notes; // failures, printed under the table
  t.section(fmt::format("headgrad vs PyTorch: {} threads; headgrad: OpenBLAS core {}, OMP_WAIT_POLICY {}; PyTorch: {}",
                        threads, blas.core, result["headgrad"]["omp_wait_policy"].get<std::string>(),
                        [&]() -> std::string {
                          if (!runner.torch) return "not run (" + torch_info["reason"].get<std::string>() + ")";
                          std::string s = torch_info["version"].get<std::string>();
                          if (torch_info.contains("blas")) {
                            const json& b = torch_info["blas"];
                            s += fmt::format(", BLAS_INFO={}", b.value("torch_blas_info", "?"));
                            if (b.contains("library") && !b["library"].is_null())
                              s += fmt::format(" -> {}", b["library"].get<std::string>());
                            if (b.contains("openblas_core") && !b["openblas_core"].is_null())
                              s += fmt::format(" (OpenBLAS core {})", b["openblas_core"].get<std::string>());
                          }
                          s += fmt::format(", OMP_WAIT_POLICY {}", torch_info["omp_wait_policy"].get<std::string>());
                          return s;
                        }()));
  {
    std::string overridden;
    for (const auto& [flag, src] : source.items())
      if (src == "flag") overridden += (overridden.empty() ? " (flags: --" : ", --") + flag;
    if (!overridden.empty()) overridden += ")";
    t.section(fmt::format("training settings: headgrad train defaults{}: {}", overridden, settings_summary(settings)));
  }
  t.section(fmt::format("FLOPs: {}", kFlopFormula));
  {
    const double load_end = load_average();
    result["load_average_end"] = load_end;
    const int cores = runtime::available_cores();
    const bool busy = std::max(load_start, load_end) > cores + 0.5; // this run alone keeps <= cores busy
    t.section(fmt::format("load average {:.1f} at start, {:.1f} at the end, {} cores{}", load_start, load_end, cores,
                          busy ? ": the machine was busy, timings are inflated and noisy" : ""));
  }
  t.section(fmt::format("ms/step: median of {} windows x {} steps after {} warm-up steps; tokens/s = B*T/step{}", windows,
                        per, warm, quick ? " (--quick: a smoke run, the figures mean little)" : ""));
  t.section("");
  t.row("metric", "headgrad", "PyTorch", "hg/pt", "target", "status");
  for (const auto& c : configs) {
    const json& r = result["configs"][c.name];
    const json& hg = r["headgrad"];
    const json& pt = r["torch"];
    t.section(fmt::format("{}: {}, {:.3f} GFLOP/step", c.name, c.str(), step_flops(c.run) * 1e-9));
    const double hms = num(hg, "ms_per_step"), pms = num(pt, "ms_per_step");
    auto or_failed = [](const json& j, const std::string& text) { return has(j, "error") ? "failed" : text; };
    t.row("ms/step", or_failed(hg, fmt_num(hms, 2)), or_failed(pt, fmt_num(pms, 2)), fmt_ratio(hms / pms));
    for (const auto& [who, j] : {std::pair<const char*, const json*>{"headgrad", &hg}, {"PyTorch", &pt}})
      if (has(*j, "error")) notes.push_back(fmt::format("{} {}: {}", who, c.name, (*j)["error"].get<std::string>()));
    const double tr = num(hg, "tokens_per_s") / num(pt, "tokens_per_s");
    const double want = c.name == "small" ? 5.0 : 2.0;
    const auto met_tps = check(tr, want, true);
    t.row("tokens/s", fmt_si(num(hg, "tokens_per_s")), fmt_si(num(pt, "tokens_per_s")), fmt_ratio(tr),
          fmt::format(">= {:g}x PyTorch", want), status_of(met_tps));
    add_target(targets, fmt::format("{} tokens/s >= {:g}x PyTorch", c.name, want), tr,
               fmt::format(">= {:g}", want), met_tps);
    t.row("achieved GFLOP/s", fmt_num(num(hg, "gflops")), fmt_num(num(pt, "gflops")),
          fmt_ratio(num(hg, "gflops") / num(pt, "gflops")));
    const double limit = has(hg, "sgemm") ? hg["sgemm"]["best_gflops"].get<double>() : NAN;
    const double mix = has(hg, "sgemm") ? hg["sgemm"]["mix_gflops"].get<double>() : NAN;
    t.row("sgemm limit GFLOP/s (best shape)", fmt_num(limit), "", "",
          has(hg, "sgemm") ? hg["sgemm"]["best_shape"].get<std::string>() : "");
    t.row("sgemm GFLOP/s over the step's mix", fmt_num(mix), "", "");
    const double frac = num(hg, "gflops") / limit;
    const double pfrac = num(pt, "gflops") / limit;
    if (c.name == "large") {
      const auto met = check(frac, 0.6, true);
      t.row("achieved / sgemm limit", fmt_pct(frac), fmt_pct(pfrac), "", ">= 60%",
            status_of(met));
      add_target(targets, "large achieved GFLOP/s >= 60% of the sgemm limit", frac, ">= 0.6", met);
    } else {
      t.row("achieved / sgemm limit", fmt_pct(frac), fmt_pct(pfrac), "");
    }
    const double hr = num(hg, "peak_rss_kib") / 1024, pr = num(pt, "peak_rss_kib") / 1024;
    const std::optional<bool> met_rss = std::isfinite(hr / pr) ? std::optional<bool>(hr < pr) : std::nullopt;

    t.row("peak RSS MiB (VmHWM)", fmt_num(hr), fmt_num(pr), fmt_ratio(hr / pr), "< PyTorch", status_of(met_rss));
    add_target(targets, fmt::format("{} peak RSS < PyTorch", c.name), hr / pr, "< 1", met_rss);
    const double hl = num(hg, "first_loss"), pl = num(pt, "first_loss");
    const double dl = std::abs(hl - pl);
    const auto met_loss = check(dl, 1e-5, false);
    t.row("first-step loss", fmt_num(hl, 6), fmt_num(pl, 6), std::isfinite(dl) ? fmt::format("d {:.0e}", dl) : "-",
          "|diff| <= 1e-5", status_of(met_loss));
    add_target(targets, fmt::format("{} first-step loss matches PyTorch", c.name), dl, "<= 1e-5", met_loss);
  }
  if (result.contains("time_to_accuracy")) {
    const json& a = result["time_to_accuracy"];
    const json& hg = a["headgrad"];
    const json& pt = a["torch"];
    t.section(fmt::format("time to held-out seq acc >= {:g}: small, eval every {} steps (eval time excluded), at most {} "
                          "steps",
                          tta_target, eval_every, tta_max));
    auto secs = [](const json& j) { return has(j, "reached") && j["reached"].get<bool>() ? num(j, "seconds") : NAN; };
    auto txt = [](const json& j, double s) -> std::string {
      if (has(j, "error")) return "failed";
      if (!has(j, "reached")) return "-";
      return j["reached"].get<bool>() ? fmt_num(s, 1) : fmt::format(">{:.0f}", num(j, "seconds"));
    };
    const double hs = secs(hg), ps = secs(pt), ratio = hs / ps;
    std::optional<bool> met = check(ratio, 0.2, false);
    if (has(hg, "reached") && !hg["reached"].get<bool>()) met = false;
    t.row("seconds to target", txt(hg, hs), txt(pt, ps), fmt_ratio(ratio), "<= 0.2x PyTorch", status_of(met));
    auto steps = [](const json& j) -> std::string {
      if (has(j, "error")) return "failed";
      if (!has(j, "reached")) return "-";
      return j["reached"].get<bool>() ? fmt::format("{}", j["steps"].get<std::int64_t>())
                                      : fmt::format(">{}", j["steps"].get<std::int64_t>());
    };
    t.row("steps to target", steps(hg), steps(pt), "");
    add_target(targets, "small time-to-0.99 <= 1/5 of PyTorch's", ratio, "<= 0.2", met);
    for (const auto& [who, j] : {std::pair<const char*, const json*>{"headgrad", &hg}, {"PyTorch", &pt}})
      if (has(*j, "error")) notes.push_back(fmt::format("{} time to accuracy: {}", who, (*j)["error"].get<std::string>()));
  }
  if (result.contains("soak")) {
    const json& s = result["soak"];
    t.section(fmt::format("soak: small, RSS (VmRSS) at step 100 and at step {}", soak_steps));
    if (has(s, "growth_percent")) {
      const double g = s["growth_percent"];
      const auto met = check(g, 1.0, false);
      t.row("RSS growth", fmt::format("{:.2f}%", g), "", "", "< 1%", status_of(met));
      t.row("RSS MiB at step 100 -> end",
            fmt::format("{:.1f}->{:.1f}", s["baseline"]["rss_kib"].get<double>() / 1024,
                        s["end"]["rss_kib"].get<double>() / 1024),
            "", "");
      t.row("system allocs at step 100 -> end",
            fmt::format("{}->{}", s["baseline"]["system_allocs"].get<std::int64_t>(),
                        s["end"]["system_allocs"].get<std::int64_t>()),
            "", "");
      add_target(targets, "RSS growth step 100 -> end < 1%", g, "< 1", met);
    } else {
      t.row("RSS growth", has(s, "error") ? "failed" : "-", "", "", "< 1%", "n/a");
      if (has(s, "error")) notes.push_back("soak: " + s["error"].get<std::string>());
      add_target(targets, "RSS growth step 100 -> end < 1%", NAN, "< 1", std::nullopt);
    }
  }
  for (const auto& n : notes) t.section("note: " + n);
  t.section("");
  for (const auto& c : configs) t.out += profile_summary(c.name, result["configs"][c.name]["headgrad"]);
  result["targets"] = targets;
  result["wall_seconds"] = now_seconds() - wall0;
  t.section(fmt::format("bench wall time {:.0f} s", now_seconds() - wall0));

  fmt::print("{}", t.out);
  const std::string dumped = result.dump();
  if (!args.text("json-file").empty()) {
    std::ofstream f(args.text("json-file"));
    f << result.dump(1) << "\n";
    if (!f) throw std::runtime_error(fmt::format("{}: cannot write", args.text("json-file")));
  }
  if (args.flag("json")) fmt::print("{}\n", dumped);
  std::fflush(stdout);
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
  headgrad::cli::maybe_reexec_with_better_blas_core(argc, argv);
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
