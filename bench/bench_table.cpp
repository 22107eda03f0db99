#include "bench/bench_table.hpp"

#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <vector>

#include "bench/flop_model.hpp"
#include "bench/result_json.hpp"

namespace headgrad::bench {
namespace {

using json = nlohmann::json;

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

std::string status_of(const std::optional<bool>& met) { return !met ? "n/a" : *met ? "ok" : "MISS"; }

std::optional<bool> check(double value, double bound, bool at_least) {
  if (!std::isfinite(value)) return std::nullopt;
  return at_least ? value >= bound : value <= bound;
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
  if (has(p, "workers_ms") && p["workers_ms"].size() > 1) { // the step waits for its slowest worker
    std::string each;
    for (const auto& t : p["workers_ms"]) each += fmt::format("{}{:.2f}", each.empty() ? "" : " / ", t.get<double>());
    s += fmt::format("  threads' ms/step in their shards of the batch: {}; the fastest waited {:.2f}\n", each,
                     p["workers_wait_ms"].get<double>());
  }
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

// The table as it is built: its text, the notes under it and the targets.
struct Table {
  std::string out;
  std::vector<std::string> notes; // failures, printed under the table
  json targets = json::array();

  void section(const std::string& s) { out += s + "\n"; }
  void row(const std::string& metric, const std::string& hg, const std::string& pt, const std::string& ratio,
           const std::string& target = "", const std::string& status = "") {
    out += fmt::format("  {:<36} {:>11} {:>11} {:>9}   {:<22} {}\n", metric, hg, pt, ratio, target, status);
  }
  void target(const std::string& name, double value, const std::string& bound, const std::optional<bool>& met) {
    targets.push_back({{"name", name},
                       {"value", std::isfinite(value) ? json(value) : json(nullptr)},
                       {"target", bound},
                       {"met", met ? json(*met) : json(nullptr)}});
  }
  // A note for each side whose result is an error.
  void note_errors(const std::string& what, const json& hg, const json& pt) {
    for (const auto& [who, j] : {std::pair<const char*, const json*>{"headgrad", &hg}, {"PyTorch", &pt}})
      if (has(*j, "error")) notes.push_back(fmt::format("{} {}: {}", who, what, (*j)["error"].get<std::string>()));
  }
};

// "1.13.0, BLAS_INFO=generic -> libblas.so.3 (OpenBLAS core Haswell), OMP_WAIT_POLICY PASSIVE"
std::string torch_description(const json& torch) {
  if (!torch["available"].get<bool>()) return "not run (" + torch["reason"].get<std::string>() + ")";
  std::string s = torch["version"].get<std::string>();
  if (torch.contains("blas")) {
    const json& b = torch["blas"];
    s += fmt::format(", BLAS_INFO={}", b.value("torch_blas_info", "?"));
    if (b.contains("library") && !b["library"].is_null()) s += fmt::format(" -> {}", b["library"].get<std::string>());
    if (b.contains("openblas_core") && !b["openblas_core"].is_null())
      s += fmt::format(" (OpenBLAS core {})", b["openblas_core"].get<std::string>());
  }
  s += fmt::format(", OMP_WAIT_POLICY {}", torch["omp_wait_policy"].get<std::string>());
  return s;
}

// What ran where, with which settings, how busy the machine was, and the column titles.
void header(Table& t, const BenchOptions& o, const json& result) {
  t.section(fmt::format("CPU: {} ({} cores; {})", result["cpu"]["model"].get<std::string>(), result["cores"].get<int>(),
                        result["cpu"]["features"].get<std::string>()));
  if (result["cpu"].contains("onednn"))
    t.section(fmt::format("{}; bf16 gemms {}; precision {} (PyTorch: {})", result["cpu"]["onednn"].get<std::string>(),
                          result["cpu"]["bf16"].get<std::string>(), result["train"]["precision"].get<std::string>(),
                          result["train"]["precision"] == "bf16" ? "torch.autocast('cpu', dtype=torch.bfloat16)"
                                                                 : "float32"));
  t.section(fmt::format("headgrad vs PyTorch: {} threads; headgrad: OpenBLAS core {}, OMP_WAIT_POLICY {}; PyTorch: {}",
                        o.threads, result["headgrad"]["openblas_core"].get<std::string>(),
                        result["headgrad"]["omp_wait_policy"].get<std::string>(), torch_description(result["torch"])));
  // like with like: PyTorch's OpenBLAS inherits the OPENBLAS_CORETYPE headgrad's start-up path
  // chose; say so if it ran another kernel all the same
  const json& torch = result["torch"];
  if (torch.value("available", false) && torch.contains("blas") && torch["blas"].contains("openblas_core") &&
      !torch["blas"]["openblas_core"].is_null() &&
      torch["blas"]["openblas_core"].get<std::string>() != result["headgrad"]["openblas_core"].get<std::string>())
    t.notes.push_back(fmt::format("PyTorch ran OpenBLAS core {}, headgrad {}: the gemms are not like with like",
                                  torch["blas"]["openblas_core"].get<std::string>(),
                                  result["headgrad"]["openblas_core"].get<std::string>()));
  std::string overridden;
  for (const auto& [flag, src] : o.settings_source.items())
    if (src == "flag") overridden += (overridden.empty() ? " (flags: --" : ", --") + flag;
  if (!overridden.empty()) overridden += ")";
  t.section(fmt::format("training settings: headgrad train defaults{}: {}", overridden, settings_summary(o.settings)));
  t.section(fmt::format("FLOPs: {}", kFlopFormula));
  const double load_start = result["load_average_start"], load_end = result["load_average_end"];
  const int cores = result["cores"];
  const bool busy = std::max(load_start, load_end) > cores + 0.5; // this run alone keeps <= cores busy
  t.section(fmt::format("load average {:.1f} at start, {:.1f} at the end, {} cores{}", load_start, load_end, cores,
                        busy ? ": the machine was busy, timings are inflated and noisy" : ""));
  t.section(fmt::format("ms/step: median of {} windows x {} steps after {} warm-up steps; tokens/s = B*T/step{}",
                        o.windows, o.window_steps, o.warmup_steps,
                        o.quick ? " (--quick: a smoke run, the figures mean little)" : ""));
  t.section("");
  t.row("metric", "headgrad", "PyTorch", "hg/pt", "target", "status");
}

// The targets of a configuration (0: none).
struct ConfigTargets {
  double best_ratio = 0;    // tokens/s against PyTorch, each side at its best thread count
  double mix_fraction = 0;  // achieved GFLOP/s / the sgemm mix limit, at --threads threads
  double scaling = 0;       // headgrad at --threads threads vs 1 thread
  double rss_ratio = 0;     // peak RSS against PyTorch's, at most
};
ConfigTargets targets_of(const std::string& name) {
  if (name == "small") return {4.0, 0.75, 1.6, 1.0};
  if (name == "large") return {2.3, 0.85, 0, 1.0};
  if (name == "long") return {2.0, 0, 0, 0.25};
  return {};
}

// The better of a side's two runs ("headgrad" at --threads, "headgrad_1" at 1), with its threads.
std::pair<double, int> best_tokens(const json& r, const char* side, const char* side_1, int threads) {
  const double n = num(r[side], "tokens_per_s"), one = r.contains(side_1) ? num(r[side_1], "tokens_per_s") : NAN;
  if (std::isfinite(one) && !(n > one)) return {one, 1};
  return {n, threads};
}

// Throughput of one configuration: speed at 1 and N threads and each side at its best, the
// scaling, GFLOP/s against the sgemm limit, the attention op's share, memory, first loss.
void throughput_rows(Table& t, const BenchOptions& o, const BenchConfig& c, const json& r) {
  const json& hg = r["headgrad"];
  const json& pt = r["torch"];
  const ConfigTargets want = targets_of(c.name);
  t.section(fmt::format("{}: {}, {:.3f} GFLOP/step", c.name, c.str(), step_flops(c.run) * 1e-9));
  auto or_failed = [](const json& j, const std::string& text) { return has(j, "error") ? "failed" : text; };
  const double hms = num(hg, "ms_per_step"), pms = num(pt, "ms_per_step");
  t.row(fmt::format("ms/step, {} threads", o.threads), or_failed(hg, fmt_num(hms, 2)), or_failed(pt, fmt_num(pms, 2)),
        fmt_ratio(hms / pms));
  t.note_errors(c.name, hg, pt);
  if (r.contains("headgrad_1")) {
    const json &hg1 = r["headgrad_1"], &pt1 = r["torch_1"];
    t.row("tokens/s, 1 thread", or_failed(hg1, fmt_si(num(hg1, "tokens_per_s"))),
          or_failed(pt1, fmt_si(num(pt1, "tokens_per_s"))), fmt_ratio(num(hg1, "tokens_per_s") / num(pt1, "tokens_per_s")));
    t.note_errors(c.name + " at 1 thread", hg1, pt1);
  }
  t.row(fmt::format("tokens/s, {} threads (equal threads)", o.threads), fmt_si(num(hg, "tokens_per_s")),
        fmt_si(num(pt, "tokens_per_s")), fmt_ratio(num(hg, "tokens_per_s") / num(pt, "tokens_per_s")));
  const auto [hbest, hthreads] = best_tokens(r, "headgrad", "headgrad_1", o.threads);
  const auto [pbest, pthreads] = best_tokens(r, "torch", "torch_1", o.threads);
  const double best_ratio = hbest / pbest;
  const auto met_best = want.best_ratio > 0 ? check(best_ratio, want.best_ratio, true) : std::nullopt;
  t.row("tokens/s, each at its best", fmt::format("{} ({}t)", fmt_si(hbest), hthreads),
        fmt::format("{} ({}t)", fmt_si(pbest), pthreads), fmt_ratio(best_ratio),
        want.best_ratio > 0 ? fmt::format(">= {:g}x PyTorch", want.best_ratio) : "", status_of(met_best));
  if (want.best_ratio > 0)
    t.target(fmt::format("{} tokens/s >= {:g}x PyTorch (each at its best thread count)", c.name, want.best_ratio),
             best_ratio, fmt::format(">= {:g}", want.best_ratio), met_best);
  if (r.contains("headgrad_1")) {
    const double scaling = num(hg, "tokens_per_s") / num(r["headgrad_1"], "tokens_per_s");
    const auto met = want.scaling > 0 ? check(scaling, want.scaling, true) : std::nullopt;
    t.row(fmt::format("headgrad {} threads vs 1", o.threads), fmt_ratio(scaling), "", "",
          want.scaling > 0 ? fmt::format(">= {:g}x", want.scaling) : "", status_of(met));
    if (want.scaling > 0)
      t.target(fmt::format("{} headgrad {} threads vs 1 >= {:g}x", c.name, o.threads, want.scaling), scaling,
               fmt::format(">= {:g}", want.scaling), met);
  }
  t.row("achieved GFLOP/s", fmt_num(num(hg, "gflops")), fmt_num(num(pt, "gflops")),
        fmt_ratio(num(hg, "gflops") / num(pt, "gflops")));
  if (has(hg, "sgemm")) {
    const double limit = hg["sgemm"]["best_gflops"].get<double>(), mix = hg["sgemm"]["mix_gflops"].get<double>();
    t.row("sgemm limit GFLOP/s (best shape)", fmt_num(limit), "", "", hg["sgemm"]["best_shape"].get<std::string>());
    t.row("sgemm GFLOP/s over the step's mix", fmt_num(mix), "", "");
    const double frac = num(hg, "gflops") / mix, pfrac = num(pt, "gflops") / mix;
    const auto met = want.mix_fraction > 0 ? check(frac, want.mix_fraction, true) : std::nullopt;
    t.row("achieved / sgemm mix limit", fmt_pct(frac), fmt_pct(pfrac), "",
          want.mix_fraction > 0 ? fmt::format(">= {:.0f}%", 100 * want.mix_fraction) : "", status_of(met));
    if (want.mix_fraction > 0)
      t.target(fmt::format("{} achieved >= {:.0f}% of the sgemm mix limit", c.name, 100 * want.mix_fraction), frac,
               fmt::format(">= {:g}", want.mix_fraction), met);
  }
  if (has(hg, "sgemm_bf16")) { // --precision bf16: linear gemms bf16 (oneDNN), attention's float32
    const double mix = hg["sgemm_bf16"]["mix_gflops"].get<double>();
    t.row("bf16 gemm GFLOP/s over the step's mix", fmt_num(mix), "", "", "linear bf16, attention float32");
    t.row("achieved / bf16 mix limit", fmt_pct(num(hg, "gflops") / mix), fmt_pct(num(pt, "gflops") / mix), "");
  }
  if (has(hg, "profile")) {
    double attention = 0;
    for (const auto& op : hg["profile"]["ops"])
      if (op["op"] == "attention") attention = op["fwd_ms"].get<double>() + op["bwd_ms"].get<double>();
    t.row("attention op, share of op time", fmt_pct(attention / hg["profile"]["op_ms_per_step"].get<double>()), "", "");
  }
  const double hr = num(hg, "peak_rss_kib") / 1024, pr = num(pt, "peak_rss_kib") / 1024;
  const auto met_rss = want.rss_ratio > 0 ? check(hr / pr, want.rss_ratio, false) : std::nullopt;
  t.row("peak RSS MiB (VmHWM)", fmt_num(hr), fmt_num(pr), fmt_ratio(hr / pr),
        want.rss_ratio >= 1 ? "<= PyTorch" : fmt::format("<= {:g}x PyTorch", want.rss_ratio), status_of(met_rss));
  t.target(fmt::format("{} peak RSS <= {:g}x PyTorch", c.name, want.rss_ratio), hr / pr,
           fmt::format("<= {:g}", want.rss_ratio), met_rss);
  const double hl = num(hg, "first_loss"), pl = num(pt, "first_loss");
  const double dl = std::abs(hl - pl);
  // bf16 (both sides' linear gemms on bf16-rounded inputs, PyTorch's attention too) moves the
  // first loss by about 1e-3 of it: the comparison then allows 1e-2
  const bool bf16 = c.run.precision == "bf16";
  const double loss_tol = bf16 ? 1e-2 : 1e-5;
  const auto met_loss = check(dl, loss_tol, false);
  t.row("first-step loss", fmt_num(hl, 6), fmt_num(pl, 6), std::isfinite(dl) ? fmt::format("d {:.0e}", dl) : "-",
        fmt::format("|diff| <= {:g}", loss_tol), status_of(met_loss));
  t.target(fmt::format("{} first-step loss matches PyTorch", c.name), dl, fmt::format("<= {:g}", loss_tol), met_loss);
}

// Seconds and steps to the held-out accuracy target, both sides.
void tta_rows(Table& t, const BenchOptions& o, const json& a) {
  const json& hg = a["headgrad"];
  const json& pt = a["torch"];
  t.section(fmt::format("time to held-out seq acc >= {:g}: small, eval every {} steps (eval time excluded), at most {} "
                        "steps",
                        o.tta_target, o.tta_eval_every, o.tta_max_steps));
  auto secs = [](const json& j) { return has(j, "reached") && j["reached"].get<bool>() ? num(j, "seconds") : NAN; };
  auto txt = [](const json& j, double s) -> std::string {
    if (has(j, "error")) return "failed";
    if (!has(j, "reached")) return "-";
    return j["reached"].get<bool>() ? fmt_num(s, 1) : fmt::format(">{:.0f}", num(j, "seconds"));
  };
  const double hs = secs(hg), ps = secs(pt), ratio = hs / ps;
  std::optional<bool> met = check(hs, 20.0, false);
  if (has(hg, "reached") && !hg["reached"].get<bool>()) met = false;
  t.row("seconds to target", txt(hg, hs), txt(pt, ps), fmt_ratio(ratio), "<= 20 s", status_of(met));
  auto steps = [](const json& j) -> std::string {
    if (has(j, "error")) return "failed";
    if (!has(j, "reached")) return "-";
    return j["reached"].get<bool>() ? fmt::format("{}", j["steps"].get<std::int64_t>())
                                    : fmt::format(">{}", j["steps"].get<std::int64_t>());
  };
  t.row("steps to target", steps(hg), steps(pt), "");
  t.target("small time to 0.99 <= 20 s of training", hs, "<= 20", met);
  t.note_errors("time to accuracy", hg, pt);
}

// RSS growth over the soak run (headgrad only).
void soak_rows(Table& t, const BenchOptions& o, const json& s) {
  t.section(fmt::format("soak: small, RSS (VmRSS) at step 100 and at step {}", o.soak_steps));
  if (!has(s, "growth_percent")) {
    t.row("RSS growth", has(s, "error") ? "failed" : "-", "", "", "< 1%", "n/a");
    if (has(s, "error")) t.notes.push_back("soak: " + s["error"].get<std::string>());
    t.target("RSS growth step 100 -> end < 1%", NAN, "< 1", std::nullopt);
    return;
  }
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
  t.target("RSS growth step 100 -> end < 1%", g, "< 1", met);
}

} // namespace

std::string render_table(const BenchOptions& o, json& result) {
  Table t;
  header(t, o, result);
  for (const auto& c : o.configs) throughput_rows(t, o, c, result["configs"][c.name]);
  if (result.contains("time_to_accuracy")) tta_rows(t, o, result["time_to_accuracy"]);
  if (result.contains("soak")) soak_rows(t, o, result["soak"]);
  for (const auto& n : t.notes) t.section("note: " + n);
  t.section("");
  for (const auto& c : o.configs) t.out += profile_summary(c.name, result["configs"][c.name]["headgrad"]);
  t.section(fmt::format("bench wall time {:.0f} s", result["wall_seconds"].get<double>()));
  result["targets"] = t.targets;
  return t.out;
}

} // namespace headgrad::bench
