#include "train/run/checkpoint_files.hpp"

#include <filesystem>
#include <fmt/format.h>

#include "framework/io/restore.hpp"

namespace headgrad::train {

std::string optimizer_path_for(const std::string& model_path) {
  return (std::filesystem::path(model_path).parent_path() / "optimizer.safetensors").string();
}

std::string previous_optimizer_path_for(const std::string& model_path) {
  return (std::filesystem::path(model_path).parent_path() / "optimizer.prev.safetensors").string();
}

void save_checkpoint_files(const std::string& model_path, const NamedTensors& parameters,
                           const NamedTensors* optimizer_state, const NamedTensors& run_state,
                           const std::map<std::string, std::string>& meta) {
  const io::SaveOptions checked{.checksums = true}; // a flipped bit is refused when the run is loaded
  if (!optimizer_state) {
    io::save_safetensors(model_path, parameters, meta, checked);
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
  NamedTensors state = *optimizer_state;
  state.insert(state.end(), run_state.begin(), run_state.end());
  io::save_safetensors(cur, state, meta, checked);
  io::save_safetensors(model_path, parameters, meta, checked);
  std::filesystem::remove(prev, ec); // best effort: a leftover prev is never preferred over a match
}

MatchingOptimizerFile matching_optimizer_file(const std::string& model_path, std::int64_t model_step,
                                              const CheckpointStepOf& step_of) {
  const std::string path = optimizer_path_for(model_path), prev = previous_optimizer_path_for(model_path);
  std::error_code ec;
  const bool have_cur = std::filesystem::exists(path, ec), have_prev = std::filesystem::exists(prev, ec);
  std::int64_t cur_step = -1;
  if (have_cur || !have_prev) { // no file at all: load_safetensors names the missing path
    io::SafetensorsFile f = io::load_safetensors(path);
    cur_step = step_of(f, path);
    if (cur_step == model_step) return {std::move(f), path, false};
  }
  if (have_prev) { // a save was interrupted between the optimizer and the model write
    io::SafetensorsFile f = io::load_safetensors(prev);
    if (step_of(f, prev) == model_step) return {std::move(f), prev, true};
  }
  if (!have_cur)
    throw std::invalid_argument(fmt::format("{}: missing, and {} is not from the model's step {}", path, prev,
                                            model_step));
  throw std::invalid_argument(fmt::format("{}: optimizer state is from step {} but the model is from step {}", path,
                                          cur_step, model_step));
}

NamedTensors restore_optimizer_file(const io::SafetensorsFile& f, const std::string& source, optim::Optimizer& optimizer,
                                    const std::string& prefix) {
  NamedTensors run_state;
  for (const auto& [name, t] : f.tensors)
    if (name.rfind(prefix, 0) == 0) run_state.emplace_back(name, t);
  io::restore_optimizer_state(optimizer, f.tensors, source);
  return run_state;
}

NamedTensors load_optimizer_state_files(const std::string& model_path, std::int64_t model_step,
                                        optim::Optimizer& optimizer, const CheckpointStepOf& step_of,
                                        const std::string& prefix) {
  const MatchingOptimizerFile match = matching_optimizer_file(model_path, model_step, step_of);
  NamedTensors run_state = restore_optimizer_file(match.file, match.path, optimizer, prefix);
  if (match.previous) std::filesystem::rename(match.path, optimizer_path_for(model_path)); // current again
  return run_state;
}

} // namespace headgrad::train
