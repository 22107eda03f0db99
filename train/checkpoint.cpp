#include "train/checkpoint.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>

#include "framework/io/safetensors.hpp"

namespace headgrad::train {
namespace {

std::string get(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& source) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw std::invalid_argument(fmt::format("{}: checkpoint metadata lacks '{}' (not a headgrad checkpoint?)", source, key));
  return it->second;
}

std::int64_t get_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& source) {
  const std::string v = get(meta, key, source);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno)
    throw std::invalid_argument(fmt::format("{}: checkpoint metadata '{}' = '{}' is not an integer", source, key, v));
  return x;
}

double get_real(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& source) {
  const std::string v = get(meta, key, source);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end)
    throw std::invalid_argument(fmt::format("{}: checkpoint metadata '{}' = '{}' is not a number", source, key, v));
  return x;
}

} // namespace

std::map<std::string, std::string> run_metadata(const RunConfig& c, std::int64_t step) {
  return {{"format", "headgrad-checkpoint-1"},
          {"task", data::task_name(c.task.task)},
          {"vocab", std::to_string(c.model.vocab)},
          {"d_model", std::to_string(c.model.d_model)},
          {"heads", std::to_string(c.model.heads)},
          {"layers", std::to_string(c.model.layers)},
          {"ffn", std::to_string(c.model.ffn)},
          {"max_len", std::to_string(c.model.max_len)},
          {"min_len", std::to_string(c.task.min_len)},
          {"dropout", fmt::format("{}", c.model.dropout)},
          {"optimizer", c.optimizer},
          {"lr", fmt::format("{}", c.lr)},
          {"weight_decay", fmt::format("{}", c.weight_decay)},
          {"momentum", fmt::format("{}", c.momentum)},
          {"clip", fmt::format("{}", c.clip)},
          {"warmup", std::to_string(c.warmup)},
          {"schedule", c.schedule},
          {"steps", std::to_string(c.steps)},
          {"batch", std::to_string(c.batch)},
          {"seed", std::to_string(c.seed)},
          {"step", std::to_string(step)}};
}

RunConfig run_config_from_metadata(const std::map<std::string, std::string>& m, const std::string& src,
                                   std::int64_t& step) {
  if (get(m, "format", src) != "headgrad-checkpoint-1")
    throw std::invalid_argument(fmt::format("{}: unknown checkpoint format '{}'", src, get(m, "format", src)));
  RunConfig c;
  c.task.task = data::parse_task(get(m, "task", src));
  c.model.vocab = c.task.vocab = get_int(m, "vocab", src);
  c.model.d_model = get_int(m, "d_model", src);
  c.model.heads = get_int(m, "heads", src);
  c.model.layers = get_int(m, "layers", src);
  c.model.ffn = get_int(m, "ffn", src);
  c.model.max_len = c.task.max_len = get_int(m, "max_len", src);
  c.task.min_len = get_int(m, "min_len", src);
  c.model.dropout = get_real(m, "dropout", src);
  c.optimizer = get(m, "optimizer", src);
  c.lr = get_real(m, "lr", src);
  c.weight_decay = get_real(m, "weight_decay", src);
  c.momentum = get_real(m, "momentum", src);
  c.clip = get_real(m, "clip", src);
  c.warmup = get_int(m, "warmup", src);
  c.schedule = get(m, "schedule", src);
  c.steps = get_int(m, "steps", src);
  c.batch = get_int(m, "batch", src);
  c.seed = static_cast<std::uint64_t>(get_int(m, "seed", src));
  step = get_int(m, "step", src);
  try {
    c.model.validate();
    data::validate(c.task);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: checkpoint config is invalid: {}", src, e.what()));
  }
  if (step < 0) throw std::invalid_argument(fmt::format("{}: checkpoint step {} is negative", src, step));
  return c;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& c, const nn::NamedTensors& params) {
  if (c.optimizer == "adam" || c.optimizer == "adamw")
    return std::make_unique<optim::Adam>(
        params, optim::AdamOptions{c.lr, 0.9, 0.999, 1e-8, c.weight_decay, c.optimizer == "adamw"});
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions{c.lr, c.momentum, c.weight_decay});
  throw std::invalid_argument(fmt::format("unknown optimizer '{}' (use adam, adamw or sgd)", c.optimizer));
}

std::string optimizer_path_for(const std::string& model_path) {
  return (std::filesystem::path(model_path).parent_path() / "optimizer.safetensors").string();
}

std::string previous_optimizer_path_for(const std::string& model_path) {
  return (std::filesystem::path(model_path).parent_path() / "optimizer.prev.safetensors").string();
}

void save_checkpoint(const std::string& model_path, const models::SequenceModel& model,
                     const optim::Optimizer* optimizer, const RunConfig& cfg, std::int64_t step) {
  const auto meta = run_metadata(cfg, step);
  if (!optimizer) {
    io::save_safetensors(model_path, model.named_parameters(), meta);
    return;
  }
  // Kill points and what they leave (model M = the step on disk before this save, N = this one):
  //   before the first rename          model M, optimizer M
  //   after optimizer -> prev           model M, prev M (no optimizer)       -> prev is used
  //   after the new optimizer           model M, optimizer N, prev M         -> prev is used
  //   after the new model               model N, optimizer N (prev M, stale)
  // Each rename replaces its target atomically; save_safetensors fsyncs the directory.
  const std::string cur = optimizer_path_for(model_path), prev = previous_optimizer_path_for(model_path);
  std::error_code ec;
  if (std::filesystem::exists(cur, ec)) std::filesystem::rename(cur, prev);
  io::save_safetensors(cur, optimizer->state(), meta);
  io::save_safetensors(model_path, model.named_parameters(), meta);
  std::filesystem::remove(prev, ec); // best effort: a leftover prev is never preferred over a match
}

LoadedRun load_model_checkpoint(const std::string& model_path) {
  io::SafetensorsFile f = io::load_safetensors(model_path);
  LoadedRun run;
  run.config = run_config_from_metadata(f.metadata, model_path, run.step);
  run.model = std::make_unique<models::SequenceModel>(run.config.model, run.config.seed);
  run.model->load_parameters(f.tensors, model_path);
  return run;
}

void load_optimizer_state(const std::string& model_path, optim::Optimizer& optimizer) {
  const std::string path = optimizer_path_for(model_path), prev = previous_optimizer_path_for(model_path);
  std::int64_t model_step = 0;
  (void)run_config_from_metadata(io::load_safetensors(model_path).metadata, model_path, model_step);
  auto step_of = [](const io::SafetensorsFile& f, const std::string& source) {
    std::int64_t s = 0;
    (void)run_config_from_metadata(f.metadata, source, s);
    return s;
  };
  std::error_code ec;
  const bool have_cur = std::filesystem::exists(path, ec), have_prev = std::filesystem::exists(prev, ec);
  std::int64_t cur_step = -1;
  if (have_cur || !have_prev) { // no file at all: load_safetensors names the missing path
    io::SafetensorsFile f = io::load_safetensors(path);
    cur_step = step_of(f, path);
    if (cur_step == model_step) {
      optimizer.load_state(f.tensors, path);
      return;
    }
  }
  if (have_prev) { // a save was interrupted between the optimizer and the model write
    io::SafetensorsFile f = io::load_safetensors(prev);
    if (step_of(f, prev) == model_step) {
      optimizer.load_state(f.tensors, prev);
      std::filesystem::rename(prev, path); // the matching state is the current one again
      return;
    }
  }
  if (!have_cur)
    throw std::invalid_argument(fmt::format("{}: missing, and {} is not from the model's step {}", path, prev,
                                            model_step));
  throw std::invalid_argument(fmt::format("{}: optimizer state is from step {} but the model is from step {}", path,
                                          cur_step, model_step));
}

} // namespace headgrad::train
