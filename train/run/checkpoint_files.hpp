// checkpoint_files.hpp - the pair of files a checkpoint is, for any model: DIR/model.safetensors
// (the parameters) and DIR/optimizer.safetensors beside it (the optimizer's state and the run's
// own state, e.g. the dropout generators), written so that a kill at any moment leaves a model file
// and an optimizer file of the same step, and read back choosing the optimizer file that matches.
// The Trainer's checkpoints (train/fit/trainer.hpp) are written and read here. `headgrad train`'s
// (checkpoint.hpp) share the file names and the order of the writes, and add to them a checksum of
// each file's header and a comparison of the two files' metadata; they are read without writing,
// since a resume may read another run's directory.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "framework/core/tensor.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/optim/optimizer.hpp"

namespace headgrad::train {

// The optimizer file that belongs to a model checkpoint: DIR/optimizer.safetensors, and
// DIR/optimizer.prev.safetensors, the previous one, kept only while a save is in progress.
std::string optimizer_path_for(const std::string& model_path);
std::string previous_optimizer_path_for(const std::string& model_path);

// Writes `optimizer_state` and `run_state` (null: no optimizer file), then `parameters`, each
// atomically (temp file, fsync, rename) with per-tensor checksums and `metadata` in both files.
// The optimizer file that matches the model file already on disk is first renamed to
// optimizer.prev.safetensors and removed only once the new model file is in place.
void save_checkpoint_files(const std::string& model_path, const NamedTensors& parameters,
                           const NamedTensors* optimizer_state, const NamedTensors& run_state,
                           const std::map<std::string, std::string>& metadata);

// The step a checkpoint file says it is from (reads its metadata; throws std::invalid_argument
// naming `source` when it has none).
using CheckpointStepOf = std::function<std::int64_t(const io::SafetensorsFile& file, const std::string& source)>;

// The optimizer file saved beside `model_path` that is from the model's step `model_step`:
// optimizer.safetensors if its step is the model's, else optimizer.prev.safetensors if that one's
// is (a save was killed between the optimizer and the model write; `previous` says so). Throws
// std::invalid_argument naming the steps when neither matches.
struct MatchingOptimizerFile {
  io::SafetensorsFile file;
  std::string path;
  bool previous = false;
};
MatchingOptimizerFile matching_optimizer_file(const std::string& model_path, std::int64_t model_step,
                                              const CheckpointStepOf& step_of);
// Restores `optimizer` from an optimizer file's tensors (`source` names the file in errors) and
// returns the file's entries whose names start with `run_state_prefix` (the run's own state).
NamedTensors restore_optimizer_file(const io::SafetensorsFile& f, const std::string& source,
                                    optim::Optimizer& optimizer, const std::string& run_state_prefix);

// Loads the optimizer state saved beside `model_path`, whose step is `model_step`, into
// `optimizer`: optimizer.safetensors if its step is the model's, else optimizer.prev.safetensors
// if that one's is (a save was killed between the optimizer and the model write; the prev file
// then becomes optimizer.safetensors again). Throws std::invalid_argument naming the steps when
// neither matches. Returns the file's entries whose names start with `run_state_prefix` (the run's
// own state, not the optimizer's).
NamedTensors load_optimizer_state_files(const std::string& model_path, std::int64_t model_step,
                                        optim::Optimizer& optimizer, const CheckpointStepOf& step_of,
                                        const std::string& run_state_prefix);

} // namespace headgrad::train
