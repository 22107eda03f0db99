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
                                              "context", "tie-weights", "shards"};
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

void save_checkpoint(const std::string& model_path, const models::TokenModel& model, const optim::Optimizer* optimizer,
                     const RunConfig& cfg, std::int64_t step, const CheckpointExtras& extras) {
  auto meta = run_metadata(cfg, step);
  meta.insert(extras.metadata.begin(), extras.metadata.end());
  const NamedTensors state = optimizer ? optimizer->state() : NamedTensors{};
  save_checkpoint_files(model_path, model.named_parameters(), optimizer ? &state : nullptr, extras.run_state, meta);
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

NamedTensors load_optimizer_state(const std::string& model_path, std::int64_t model_step, optim::Optimizer& optimizer) {
  auto step_of = [](const io::SafetensorsFile& f, const std::string& source) {
    std::int64_t s = 0;
    (void)run_config_from_metadata(f.metadata, source, s);
    return s;
  };
  return load_optimizer_state_files(model_path, model_step, optimizer, step_of, kDropoutStatePrefix);
}

} // namespace headgrad::train
