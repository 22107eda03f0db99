// checkpoint.hpp - saving and loading a training run: `model.safetensors` (parameters, names as a
// PyTorch state_dict, run config in __metadata__) and `optimizer.safetensors` beside it (the
// optimizer's state, so --resume continues exactly). Both are written atomically.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "framework/optim/optimizer.hpp"
#include "models/token_model.hpp"
#include "train/run/checkpoint_files.hpp"
#include "train/run/run_config.hpp"

namespace headgrad::train {

// The metadata of both files: "format" = "headgrad-checkpoint-1", every run config field under
// its metadata_key() as to_text() writes it, and "step". Reading it back, a field added with the text
// task (beta2, min-lr, decay, text, tokenizer, context, tie-weights) or with the shard count
// (shards) that the metadata lacks (a checkpoint written before it existed) takes RunConfig{}'s
// value, which is what such a run did; any other missing field is refused.
std::map<std::string, std::string> run_metadata(const RunConfig& cfg, std::int64_t step);
// Reads a RunConfig and the step back; throws std::invalid_argument naming `source` and the key.
RunConfig run_config_from_metadata(const std::map<std::string, std::string>& meta, const std::string& source,
                                   std::int64_t& step);

// (optimizer_path_for, previous_optimizer_path_for: train/run/checkpoint_files.hpp)

// What a run keeps besides its parameters, optimizer state and config: metadata of its own (both
// files; e.g. a text model's vocabulary) and tensors of the run's state kept in the optimizer file
// (the dropout generators' states, train/parallel/dropout_state.hpp).
struct CheckpointExtras {
  std::map<std::string, std::string> metadata;
  NamedTensors run_state;
};

// The run state's entries are named "rng.<...>" (the dropout generators' states,
// "rng.shard1.blks.0.addnorm1.dropout"); no optimizer state entry is.
inline constexpr const char* kDropoutStatePrefix = "rng.";
// Whether an entry of the optimizer file is a dropout state (run state, not the optimizer's).
bool is_dropout_state(const std::string& name);

// Writes the optimizer state, then the model, each atomically (temp file, fsync, rename). The
// optimizer file that matches the model file already on disk is first renamed to
// optimizer.prev.safetensors and removed only once the new model file is in place, so a kill at
// any moment leaves a model file and an optimizer file of the same step.
void save_checkpoint(const std::string& model_path, const models::TokenModel& model, const optim::Optimizer* optimizer,
                     const RunConfig& cfg, std::int64_t step, const CheckpointExtras& extras = {});

struct LoadedRun {
  RunConfig config;
  std::int64_t step = 0;
  std::unique_ptr<models::TokenModel> model;    // the config's model (train/run/run_model.hpp)
  std::map<std::string, std::string> metadata; // the model file's, all of it
};
// Loads and checks the model file: its header checksum, its config as the flags are checked
// (RunConfig::validate), every parameter present with the right shape, nothing extra, every value
// finite (a NaN or Inf is refused naming the tensor). The optimizer state is checked the same way.
LoadedRun load_model_checkpoint(const std::string& model_path);
// Loads the optimizer state saved beside `model_path`, whose step is `model_step`, into
// `optimizer`: optimizer.safetensors if its step is the model's, else optimizer.prev.safetensors
// if that one's is (a save was killed between the optimizer and the model write). It only reads:
// a resume from another directory never writes its source (settle_interrupted_save does, for a
// run that continues in the checkpoint's own directory). Throws std::invalid_argument naming the
// steps when neither matches, and, given the model file's metadata (LoadedRun::metadata), when the
// optimizer file's differs from it (another run's file, or an edited one). Returns the run state
// kept in that file (CheckpointExtras::run_state).
NamedTensors load_optimizer_state(const std::string& model_path, std::int64_t model_step, optim::Optimizer& optimizer,
                                  const std::map<std::string, std::string>* model_metadata = nullptr);
// After a save killed between the optimizer and the model write (model M, optimizer N, prev M):
// optimizer.prev.safetensors becomes optimizer.safetensors again, so that the next save's
// rename of the current file does not replace the only state of step M. For the run that continues
// in this directory, holding its lock (train/run/run_directory.hpp).
void settle_interrupted_save(const std::string& model_path, std::int64_t model_step);

} // namespace headgrad::train
