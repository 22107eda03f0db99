// run_model.hpp - the model a run config trains: the toy tasks' encoder (models::SequenceModel) or,
// for task text, the causal language model (models::GPT).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "models/token_model.hpp"
#include "train/run/run_config.hpp"

namespace headgrad::train {

// Initialised from `seed` (the run's seed; its dropout too).
std::unique_ptr<models::TokenModel> make_model(const RunConfig& cfg, std::uint64_t seed, DType dtype = DType::f32);

// How many parameter values (the sum of numel over named_parameters()) make_model(cfg) has,
// computed from the config alone, without allocating anything: what a checkpoint's metadata
// claims is checked with it against the tensors the file holds before the model is built.
// INT64_MAX if the count does not fit in 64 bits. (tests/test_checkpoint.cpp checks it against
// built models of every kind.)
std::int64_t parameter_count(const RunConfig& cfg);

// Calls visit(name, shape) for each parameter of make_model(cfg), in named_parameters() order and
// with its names and shapes, without building the model, until visit returns false (so a config
// of a million layers costs nothing when its first missing layer stops the walk).
void visit_parameter_shapes(const RunConfig& cfg, const std::function<bool(const std::string&, const Dims&)>& visit);

} // namespace headgrad::train
