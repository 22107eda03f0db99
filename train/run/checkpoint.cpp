#include "train/run/checkpoint.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "train/run/run_model.hpp"

namespace headgrad::train {
namespace {

// The fields a checkpoint written before they existed lacks (the text task's and the optimizer's
// added with it; the shard count): such a checkpoint ran with RunConfig{}'s value. Every other
// field is required.
bool added_after_format_1(const FieldInfo& f) {
  static const std::set<std::string> later = {"beta2", "min-lr",      "decay", "text", "tokenizer",
                                              "context", "tie-weights", "shards", "data"};
  return later.count(f.flag) > 0;
}

constexpr const char* kFormat = "headgrad-checkpoint-1";

std::string get(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& source) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw std::invalid_argument(fmt::format("{}: checkpoint metadata lacks '{}' (not a headgrad checkpoint?)", source, key));
  return it->second;
}

// Reads meta[key] into `value`; the message names the source, the key and what the value should be.
template <typename T>
void read_value(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& source,
                T& value) {
  const std::string text = get(meta, key, source);
  if (!from_text(text, value))
    throw std::invalid_argument(
        fmt::format("{}: checkpoint metadata '{}' = '{}' is not {}", source, key, text, value_kind(value)));
}

} // namespace

std::map<std::string, std::string> run_metadata(const RunConfig& c, std::int64_t step) {
  std::map<std::string, std::string> meta = {{"format", kFormat}, {"step", std::to_string(step)}};
  visit_run_fields([&](const FieldInfo& f, auto member) {
    if (stored_in_checkpoint(f.role)) meta[metadata_key(f)] = to_text(c.*member);
  });
  return meta;
}

RunConfig run_config_from_metadata(const std::map<std::string, std::string>& m, const std::string& src,
                                   std::int64_t& step) {
  if (get(m, "format", src) != kFormat)
    throw std::invalid_argument(fmt::format("{}: unknown checkpoint format '{}'", src, get(m, "format", src)));
  RunConfig c;
  visit_run_fields([&](const FieldInfo& f, auto member) {
    if (stored_in_checkpoint(f.role) && (m.count(metadata_key(f)) || !added_after_format_1(f)))
      read_value(m, metadata_key(f), src, c.*member);
  });
  read_value(m, "step", src, step);
  try {
    if (c.is_text()) {
      c.gpt_config().validate();
    } else {
      c.model_config().validate();
      data::validate(c.task_config());
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: checkpoint config is invalid: {}", src, e.what()));
  }
  if (step < 0) throw std::invalid_argument(fmt::format("{}: checkpoint step {} is negative", src, step));
  return c;
}

std::string optimizer_path_for(const std::string& model_path) {
  return (std::filesystem::path(model_path).parent_path() / "optimizer.safetensors").string();
}

std::string previous_optimizer_path_for(const std::string& model_path) {
  return (std::filesystem::path(model_path).parent_path() / "optimizer.prev.safetensors").string();
}

void save_checkpoint(const std::string& model_path, const models::TokenModel& model, const optim::Optimizer* optimizer,
                     const RunConfig& cfg, std::int64_t step, const CheckpointExtras& extras) {
  auto meta = run_metadata(cfg, step);
  meta.insert(extras.metadata.begin(), extras.metadata.end());
  const io::SaveOptions checked{.checksums = true}; // a flipped bit is refused when the run is loaded
  if (!optimizer) {
    io::save_safetensors(model_path, model.named_parameters(), meta, checked);
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
  NamedTensors state = optimizer->state();
  state.insert(state.end(), extras.run_state.begin(), extras.run_state.end());
  io::save_safetensors(cur, state, meta, checked);
  io::save_safetensors(model_path, model.named_parameters(), meta, checked);
  std::filesystem::remove(prev, ec); // best effort: a leftover prev is never preferred over a match
}

namespace {

// The model the metadata describes must be the one the file holds, before it is built: a
// tampered or damaged size (d_model 65536, layers 100000, vocab 1e11) would otherwise allocate
// what it claims. Every parameter of that model must be in the file with its shape (the messages
// are io::restore_parameters'), so the model is no larger than the file's tensors, which the
// reader has bounded by the file's size; restore_parameters then checks the rest (extra tensors,
// dtypes) as it copies them.
void check_model_fits_file(const RunConfig& cfg, const io::SafetensorsFile& f, const std::string& path) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : f.tensors) given[name] = &t;
  visit_parameter_shapes(cfg, [&](const std::string& name, const Dims& shape) {
    const auto it = given.find(name);
    if (it == given.end())
      throw std::invalid_argument(fmt::format("{}: missing parameter '{}' (expected shape {}; the model the metadata "
                                              "describes is not built)",
                                              path, name, shape));
    if (!(it->second->shape() == shape))
      throw std::invalid_argument(fmt::format("{}: parameter '{}' has shape {} but the model expects {} (the model the "
                                              "metadata describes is not built)",
                                              path, name, it->second->shape(), shape));
    return true;
  });
}

} // namespace

LoadedRun load_model_checkpoint(const std::string& model_path) {
  io::SafetensorsFile f = io::load_safetensors(model_path);
  LoadedRun run;
  run.config = run_config_from_metadata(f.metadata, model_path, run.step);
  check_model_fits_file(run.config, f, model_path);
  run.model = make_model(run.config, run.config.seed);
  io::restore_parameters(*run.model, f.tensors, model_path);
  run.metadata = f.metadata;
  return run;
}

bool is_dropout_state(const std::string& name) { return name.rfind(kDropoutStatePrefix, 0) == 0; }

namespace {

// The optimizer's entries to it, and the run state's returned.
NamedTensors load_state_of(const io::SafetensorsFile& f, const std::string& source, optim::Optimizer& optimizer) {
  NamedTensors run_state;
  for (const auto& [name, t] : f.tensors)
    if (is_dropout_state(name)) run_state.emplace_back(name, t);
  io::restore_optimizer_state(optimizer, f.tensors, source);
  return run_state;
}

} // namespace

NamedTensors load_optimizer_state(const std::string& model_path, std::int64_t model_step, optim::Optimizer& optimizer) {
  const std::string path = optimizer_path_for(model_path), prev = previous_optimizer_path_for(model_path);
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
    if (cur_step == model_step) return load_state_of(f, path, optimizer);
  }
  if (have_prev) { // a save was interrupted between the optimizer and the model write
    io::SafetensorsFile f = io::load_safetensors(prev);
    if (step_of(f, prev) == model_step) {
      NamedTensors run_state = load_state_of(f, prev, optimizer);
      std::filesystem::rename(prev, path); // the matching state is the current one again
      return run_state;
    }
  }
  if (!have_cur)
    throw std::invalid_argument(fmt::format("{}: missing, and {} is not from the model's step {}", path, prev,
                                            model_step));
  throw std::invalid_argument(fmt::format("{}: optimizer state is from step {} but the model is from step {}", path,
                                          cur_step, model_step));
}

} // namespace headgrad::train
