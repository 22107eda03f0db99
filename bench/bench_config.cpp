#include "bench/bench_config.hpp"

#include <fmt/format.h>
#include <stdexcept>

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
  return {"large", with_shape(settings, {.batch = 16, .d_model = 256, .heads = 8, .ffn = 1024, .max_len = 128,
                                         .min_len = 64})};
}

BenchConfig long_config(const train::RunConfig& settings) {
  return {"long", with_shape(settings, {.batch = 2, .d_model = 256, .heads = 8, .ffn = 1024, .max_len = 2048,
                                        .min_len = 2048})};
}

BenchConfig config_by_name(const std::string& name, const train::RunConfig& settings) {
  if (name == "small") return small_config(settings);
  if (name == "large") return large_config(settings);
  if (name == "long") return long_config(settings);
  throw std::invalid_argument(fmt::format("unknown configuration '{}' (small, large or long)", name));
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

} // namespace headgrad::bench
