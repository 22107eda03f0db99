#include "bench/bench_child.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/flop_model.hpp"
#include "bench/processes.hpp"
#include "bench/run_config_json.hpp"
#include "bench/sgemm_limit.hpp"
#include "bench/timing.hpp"
#include "framework/core/autograd.hpp"
#include "framework/engine/profiler.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "framework/engine/alloc/caching_allocator.hpp"
#include "train/loop/evaluate.hpp"
#include "train/run/run_optimizer.hpp"
#include "framework/engine/autocast.hpp"
#include "train/loop/train_step.hpp"
#include "train/parallel/parallel_step.hpp"

namespace headgrad::bench {
namespace {

using json = nlohmann::json;

// Wall time of the parts of a step (profiled steps only): drawing the batch, then the step's.
struct Phases {
  double batch = 0;
  train::StepPhases step;
};

// The headgrad side of a measurement: the model and optimizer of `cfg`, stepped as the trainer
// steps them: batch `step - 1` of the run, the scheduled learning rate, the textbook or the
// parallel step.
class Stepper {
public:
  Stepper(const train::RunConfig& cfg, int threads)
      : cfg_(cfg), task_(cfg.task_config()), model_(cfg.model_config(), cfg.seed),
        optimizer_(train::make_optimizer(cfg, model_.named_parameters())),
        workers_(train::workers_for(model_, threads, cfg.seed)), schedule_(train::lr_schedule(cfg)) {}

  // Returns the step's loss.
  double step(std::int64_t step, Phases* ph = nullptr) {
    const double t0 = ph ? now_seconds() : 0;
    const data::Batch batch = data::make_batch(task_, cfg_.seed, static_cast<std::uint64_t>(step - 1), cfg_.batch);
    if (ph) ph->batch += now_seconds() - t0;
    const train::StepSettings settings{step, schedule_.at(step), cfg_.clip};
    // --precision bf16: the step's linear gemms in bf16, as the trainer runs them (train/loop/trainer.cpp)
    const runtime::Autocast autocast(model_.named_parameters(), cfg_.precision == "bf16"
                                                                    ? runtime::MatmulPrecision::bf16
                                                                    : runtime::MatmulPrecision::f32);
    // one worker on the whole batch: the textbook step, as the trainer runs it; its phases are
    // timed by the parallel step over one shard, which has the same bits
    if (!workers_ && cfg_.shards <= 1 && !ph) return train::train_step(model_, *optimizer_, batch, settings).loss;
    return train::parallel_step(model_, *optimizer_, batch, settings, {cfg_.shards, workers_.get()},
                                ph ? &ph->step : nullptr)
        .loss;
  }

  models::SequenceModel& model() { return model_; }

private:
  const train::RunConfig cfg_;
  const data::TaskConfig task_;
  models::SequenceModel model_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<train::ThreadReplicas> workers_;
  const optim::LrSchedule schedule_;
};

BenchConfig config_from_spec(const json& spec) {
  return {spec.at("config").at("name"), run_config_from_json(spec.at("config"), spec.at("train"))};
}

// Where the time goes: per-op times from the autograd profiler plus the step's phases, over
// `steps` extra steps after the timed windows (the profiler's clock calls are not in the timings).
json profile_json(Stepper& stepper, std::int64_t& s, std::int64_t steps) {
  Phases ph;
  profiler_reset();
  profiler_enable(true);
  const double t0 = now_seconds();
  for (std::int64_t j = 0; j < steps; ++j) stepper.step(++s, &ph);
  const double wall = now_seconds() - t0;
  profiler_enable(false);
  const double n = static_cast<double>(steps);
  auto rows = profiler_report();
  std::sort(rows.begin(), rows.end(), [](const OpProfile& a, const OpProfile& b) {
    return a.forward_seconds + a.backward_seconds > b.forward_seconds + b.backward_seconds;
  });
  json ops = json::array();
  double op_total = 0;
  for (const auto& row : rows) {
    op_total += row.forward_seconds + row.backward_seconds;
    ops.push_back({{"op", row.name},
                   {"fwd_ms", row.forward_seconds / n * 1e3},
                   {"bwd_ms", row.backward_seconds / n * 1e3},
                   {"fwd_calls", static_cast<double>(row.forward_calls) / n},
                   {"bwd_calls", static_cast<double>(row.backward_calls) / n}});
  }
  const WorkersProfile w = profiler_workers(); // (with 2+ threads: their shards run at once)
  json workers_ms = json::array();
  for (double t : w.seconds) workers_ms.push_back(t / n * 1e3);
  return {{"steps", steps},
          {"ms_per_step", wall / n * 1e3},
          {"workers_ms", workers_ms},
          {"workers_wait_ms", w.wait_seconds / n * 1e3},
          {"op_ms_per_step", op_total / n * 1e3},
          {"phases_ms", {{"batch", ph.batch / n * 1e3},
                         {"forward", ph.step.forward / n * 1e3},
                         {"backward", ph.step.backward / n * 1e3},
                         {"clip", ph.step.clip / n * 1e3},
                         {"optimizer", ph.step.optimizer / n * 1e3}}},
          {"ops", ops}};
}

json sgemm_json(const SgemmLimit& lim) {
  json shapes = json::array();
  for (const auto& x : lim.shapes)
    shapes.push_back({{"shape", x.shape.str()}, {"what", x.shape.what}, {"count", x.shape.count},
                      {"gflops", x.gflops}, {"ms", x.seconds * 1e3}});
  return {{"best_gflops", lim.best_gflops},
          {"best_shape", lim.best_shape},
          {"mix_gflops", lim.mix_gflops},
          {"matmul_ms_per_step", lim.matmul_ms_per_step},
          {"shapes", shapes}};
}

json throughput(const json& spec) {
  const train::RunConfig cfg = config_from_spec(spec).run;
  const std::int64_t warm = spec.at("warmup_steps"), windows = spec.at("windows"), per = spec.at("window_steps"),
                     prof_steps = spec.at("profile_steps");
  Stepper stepper(cfg, spec.at("threads").get<int>());
  std::int64_t s = 0;
  const double first_loss = stepper.step(++s);
  while (s < warm) stepper.step(++s);
  std::vector<double> window_ms;
  for (std::int64_t w = 0; w < windows; ++w) {
    const double t0 = now_seconds();
    for (std::int64_t j = 0; j < per; ++j) stepper.step(++s);
    window_ms.push_back((now_seconds() - t0) / static_cast<double>(per) * 1e3);
  }
  const double ms = median(window_ms);
  json r;
  r["first_loss"] = first_loss;
  r["window_ms"] = window_ms;
  r["ms_per_step"] = ms;
  r["tokens_per_s"] = static_cast<double>(cfg.batch * cfg.max_len) / (ms * 1e-3);
  r["gflops"] = step_flops(cfg) / (ms * 1e-3) * 1e-9;
  r["peak_rss_kib"] = proc_status_kib("VmHWM"); // before the profile pass and the sgemm buffers
  r["rss_kib"] = proc_status_kib("VmRSS");
  const AllocatorStats a = allocator_stats();
  r["allocator"] = {{"bytes_in_use", a.bytes_in_use},
                    {"bytes_cached", a.bytes_cached},
                    {"system_allocs", a.system_allocs},
                    {"cache_hits", a.cache_hits},
                    {"other_thread_hits", a.other_thread_hits}};
  if (prof_steps > 0) r["profile"] = profile_json(stepper, s, prof_steps);
  if (spec.at("sgemm_seconds").get<double>() > 0) {
    r["sgemm"] = sgemm_json(measure_sgemm_limit(cfg, spec.at("sgemm_seconds"), spec.at("threads").get<int>()));
    if (cfg.precision == "bf16")
      r["sgemm_bf16"] =
          sgemm_json(measure_sgemm_limit(cfg, spec.at("sgemm_seconds"), spec.at("threads").get<int>(), true));
  }
  return r;
}

json time_to_accuracy(const json& spec) {
  const train::RunConfig cfg = config_from_spec(spec).run;
  const std::int64_t eval_every = spec.at("eval_every"), max_steps = spec.at("max_steps");
  const double target = spec.at("target");
  const data::Batch eval_set = data::make_eval_set(cfg.task_config(), spec.at("eval_count"));
  Stepper stepper(cfg, spec.at("threads").get<int>());
  double train_seconds = 0;
  const double wall0 = now_seconds();
  json curve = json::array();
  bool reached = false;
  std::int64_t s = 0;
  double acc = 0;
  while (s < max_steps) {
    const double t0 = now_seconds();
    stepper.step(++s);
    train_seconds += now_seconds() - t0;
    if (s % eval_every == 0 || s == max_steps) {
      acc = train::evaluate(stepper.model(), eval_set).seq_acc;
      curve.push_back({s, acc});
      fmt::print(stderr, "bench:   headgrad step {:>5}: held-out seq acc {:.4f} ({:.1f} s training)\n", s, acc,
                 train_seconds);
      if (acc >= target) {
        reached = true;
        break;
      }
    }
  }
  return {{"reached", reached},        {"steps", s},  {"seconds", train_seconds}, {"wall_seconds", now_seconds() - wall0},
          {"seq_acc", acc},            {"curve", curve}};
}

json soak(const json& spec) {
  const train::RunConfig cfg = config_from_spec(spec).run;
  const std::int64_t steps = spec.at("soak_steps"), base_step = spec.at("soak_baseline_step");
  Stepper stepper(cfg, spec.at("threads").get<int>());
  json r;
  auto snapshot = [&](std::int64_t step) {
    const AllocatorStats a = allocator_stats();
    return json{{"step", step},
                {"rss_kib", proc_status_kib("VmRSS")},
                {"bytes_in_use", a.bytes_in_use},
                {"bytes_cached", a.bytes_cached},
                {"system_allocs", a.system_allocs}};
  };
  const double t0 = now_seconds();
  for (std::int64_t s = 1; s <= steps; ++s) {
    stepper.step(s);
    if (s == base_step) r["baseline"] = snapshot(s);
  }
  r["end"] = snapshot(steps);
  r["seconds"] = now_seconds() - t0;
  r["peak_rss_kib"] = proc_status_kib("VmHWM");
  const double base = r["baseline"]["rss_kib"], end = r["end"]["rss_kib"];
  r["growth_percent"] = base > 0 ? (end - base) / base * 100.0 : 0.0;
  return r;
}

} // namespace

void export_inputs(const std::string& dir, const std::string& tag, const train::RunConfig& cfg,
                   std::int64_t num_batches, std::int64_t eval_count) {
  namespace fs = std::filesystem;
  models::SequenceModel model(cfg.model_config(), cfg.seed);
  io::save_safetensors((fs::path(dir) / (tag + ".weights.safetensors")).string(), model.named_parameters());

  const std::int64_t B = cfg.batch, T = cfg.max_len;
  Tensor tokens = Tensor::zeros({num_batches, B, T}, DType::i64), targets = Tensor::zeros({num_batches, B, T}, DType::i64),
         lens = Tensor::zeros({num_batches, B}, DType::i64);
  for (std::int64_t i = 0; i < num_batches; ++i) {
    const data::Batch b = data::make_batch(cfg.task_config(), cfg.seed, static_cast<std::uint64_t>(i), B);
    const Tensor bt = b.tokens.contiguous(), bg = b.targets.contiguous(), bl = b.valid_lens.contiguous();
    std::copy_n(bt.data<std::int64_t>(), B * T, tokens.data<std::int64_t>() + i * B * T);
    std::copy_n(bg.data<std::int64_t>(), B * T, targets.data<std::int64_t>() + i * B * T);
    std::copy_n(bl.data<std::int64_t>(), B, lens.data<std::int64_t>() + i * B);
  }
  io::NamedTensors out = {{"pos_encoding", model.pos_encoding->P.slice(0, 0, T)},
                          {"tokens", tokens},
                          {"targets", targets},
                          {"valid_lens", lens}};
  if (eval_count > 0) {
    const data::Batch e = data::make_eval_set(cfg.task_config(), eval_count);
    out.push_back({"eval_tokens", e.tokens});
    out.push_back({"eval_targets", e.targets});
    out.push_back({"eval_valid_lens", e.valid_lens});
  }
  io::save_safetensors((fs::path(dir) / (tag + ".data.safetensors")).string(), out);
}

int run_child(const std::string& spec_path) {
  json spec;
  {
    std::ifstream f(spec_path);
    if (!f) throw std::runtime_error(fmt::format("{}: cannot read the spec", spec_path));
    f >> spec;
  }
  runtime::set_threads(spec.at("threads").get<int>());
  const std::string mode = spec.at("mode");
  json r;
  if (mode == "throughput") r = throughput(spec);
  else if (mode == "tta") r = time_to_accuracy(spec);
  else if (mode == "soak") r = soak(spec);
  else throw std::invalid_argument(fmt::format("{}: unknown mode '{}'", spec_path, mode));
  r["mode"] = mode;
  r["threads"] = spec.at("threads");
  const auto blas = runtime::blas_info();
  r["blas_core"] = blas.core;
  const std::string out = spec.at("result_headgrad");
  std::ofstream f(out);
  f << r.dump(1) << "\n";
  if (!f) throw std::runtime_error(fmt::format("{}: cannot write the result", out));
  return 0;
}

} // namespace headgrad::bench
