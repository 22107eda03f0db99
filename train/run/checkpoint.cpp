#include "train/run/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <set>

#include "framework/io/crc32c.hpp"
#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "train/run/run_model.hpp"

namespace headgrad::train {
namespace {

// The fields a checkpoint written before they existed lacks (the text task's and the optimizer's
// added with it; the shard count; the precision): such a checkpoint ran with RunConfig{}'s value. Every other
// field is required.
bool added_after_format_1(const FieldInfo& f) {
  static const std::set<std::string> later = {"beta2", "min-lr",      "decay", "text", "tokenizer",
                                              "context", "tie-weights", "shards", "precision", "data"};
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

// The header's checksum: CRC-32C of the metadata (every entry but this one, in key order) and the
// tensor table (names in order, with dtype and shape), as 8 hex digits. The tensors' bytes have
// checksums of their own (io::SaveOptions::checksums); this covers what they do not: the run's
// config and step, so that a flipped bit in "lr" is refused rather than resumed with.
constexpr const char* kHeaderChecksumKey = "header_crc32c";

std::string header_checksum(const std::map<std::string, std::string>& meta, const NamedTensors& tensors) {
  std::string text;
  for (const auto& [k, v] : meta)
    if (k != kHeaderChecksumKey) text += k + '\0' + v + '\n';
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  for (const auto& nt : tensors) sorted.push_back(&nt);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* nt : sorted) text += fmt::format("{}\t{}\t{}\n", nt->first, dtype_name(nt->second.dtype()), nt->second.shape());
  return fmt::format("{:08x}", io::crc32c(text.data(), text.size()));
}

// A file written with a header checksum must match it (files from before it load as they did).
void check_header_checksum(const io::SafetensorsFile& f, const std::string& source) {
  const auto it = f.metadata.find(kHeaderChecksumKey);
  if (it == f.metadata.end()) return;
  const std::string computed = header_checksum(f.metadata, f.tensors);
  if (it->second != computed)
    throw std::invalid_argument(fmt::format("{}: the header fails its checksum (stored {}, computed {}): the file is "
                                            "corrupt or was edited",
                                            source, it->second, computed));
}

// Weights or optimizer state that are NaN or infinite are refused by name: a run that diverged
// before it saved, or a damaged file, would otherwise evaluate to "loss nan" or train on from it.
void refuse_non_finite(const NamedTensors& tensors, const std::string& source) {
  for (const auto& [name, t] : tensors) {
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64) continue;
    const Tensor c = t.contiguous();
    const std::int64_t n = c.numel();
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = c.dtype() == DType::f32 ? static_cast<double>(c.data<float>()[i]) : c.data<double>()[i];
      if (std::isfinite(x)) continue;
      throw std::invalid_argument(fmt::format("{}: tensor '{}' holds {} (element {}): not a usable checkpoint (a run "
                                              "that diverged before it saved, or a damaged file)",
                                              source, name, std::isnan(x) ? "NaN" : x > 0 ? "inf" : "-inf", i));
    }
  }
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
    c.validate(); // the flags' own checks: a value `headgrad train` refuses is refused here too
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
  meta.erase(kHeaderChecksumKey); // each file's own, below
  const io::SaveOptions checked{.checksums = true}; // a flipped bit is refused when the run is loaded
  auto with_checksum = [&meta](const NamedTensors& tensors) {
    std::map<std::string, std::string> m = meta;
    m[kHeaderChecksumKey] = header_checksum(meta, tensors);
    return m;
  };
  const NamedTensors params = model.named_parameters();
  if (!optimizer) {
    io::save_safetensors(model_path, params, with_checksum(params), checked);
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
  io::save_safetensors(cur, state, with_checksum(state), checked);
  io::save_safetensors(model_path, params, with_checksum(params), checked);
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
  check_header_checksum(f, model_path);
  LoadedRun run;
  run.config = run_config_from_metadata(f.metadata, model_path, run.step);
  refuse_non_finite(f.tensors, model_path);
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
  refuse_non_finite(f.tensors, source);
  return restore_optimizer_file(f, source, optimizer, kDropoutStatePrefix);
}

// Both files of a checkpoint carry the same metadata (but the header checksum, which covers each
// file's own tensors): an optimizer file whose metadata differs belongs to another run, or one of
// the two was edited. (The step is compared by the caller: an older state is looked for elsewhere.)
void check_same_metadata(const std::map<std::string, std::string>& optimizer_meta,
                         const std::map<std::string, std::string>& model_meta, const std::string& source) {
  auto value = [](const std::map<std::string, std::string>& m, const std::string& key) {
    const auto it = m.find(key);
    return it == m.end() ? std::string("(missing)") : it->second;
  };
  std::set<std::string> keys;
  for (const auto& [k, v] : optimizer_meta) keys.insert(k);
  for (const auto& [k, v] : model_meta) keys.insert(k);
  for (const std::string& k : keys) {
    if (k == kHeaderChecksumKey || k == "step") continue;
    if (value(optimizer_meta, k) != value(model_meta, k))
      throw std::invalid_argument(fmt::format("{}: metadata '{}' is {} but the model file's is {} (the two files are "
                                              "from different runs, or one was edited)",
                                              source, k, value(optimizer_meta, k), value(model_meta, k)));
  }
}

} // namespace

NamedTensors load_optimizer_state(const std::string& model_path, std::int64_t model_step, optim::Optimizer& optimizer,
                                  const std::map<std::string, std::string>* model_metadata) {
  auto step_of = [](const io::SafetensorsFile& f, const std::string& source) {
    check_header_checksum(f, source);
    std::int64_t s = 0;
    (void)run_config_from_metadata(f.metadata, source, s);
    return s;
  };
  // read only, the prev file too: settle_interrupted_save renames it
  const MatchingOptimizerFile match = matching_optimizer_file(model_path, model_step, step_of);
  if (model_metadata) check_same_metadata(match.file.metadata, *model_metadata, match.path);
  return load_state_of(match.file, match.path, optimizer);
}

void settle_interrupted_save(const std::string& model_path, std::int64_t model_step) {
  const std::string path = optimizer_path_for(model_path), prev = previous_optimizer_path_for(model_path);
  std::error_code ec;
  if (!std::filesystem::exists(prev, ec)) return;
  auto step_in = [](const std::string& file) -> std::int64_t {
    try {
      std::int64_t s = -1;
      (void)run_config_from_metadata(io::load_safetensors(file).metadata, file, s);
      return s;
    } catch (const std::exception&) {
      return -1;
    }
  };
  if (std::filesystem::exists(path, ec) && step_in(path) == model_step) return; // prev is stale: the next save drops it
  if (step_in(prev) == model_step) std::filesystem::rename(prev, path); // the matching state is the current one again
}

} // namespace headgrad::train
