// run_model.hpp - the model a run config trains: the toy tasks' encoder (models::SequenceModel) or,
// for task text, the causal language model (models::GPT).
#pragma once
#include <memory>

#include "models/token_model.hpp"
#include "train/run_config.hpp"

namespace headgrad::train {

// Initialised from `seed` (the run's seed; its dropout too).
std::unique_ptr<models::TokenModel> make_model(const RunConfig& cfg, std::uint64_t seed, DType dtype = DType::f32);

} // namespace headgrad::train
