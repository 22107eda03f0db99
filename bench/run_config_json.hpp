// run_config_json.hpp - a run config as JSON, derived from the field table
// (train::visit_run_fields; keys are train::metadata_key). The parent writes it into each child's
// spec, which the headgrad child and the PyTorch script (torch_reference.py) read, and into the
// results: "config" holds a configuration's shape, "train" its training settings.
#pragma once
#include <nlohmann/json.hpp>

#include "train/run/run_config.hpp"

namespace headgrad::bench {

// The Role::shape fields: task, batch, d_model, heads, layers, ffn, max_len, min_len, vocab.
nlohmann::json shape_json(const train::RunConfig& c);
// The other fields, and Adam's beta1, beta2 and eps (train::make_optimizer's, for PyTorch).
nlohmann::json settings_json(const train::RunConfig& c);
// Back from the two: every field must be present.
train::RunConfig run_config_from_json(const nlohmann::json& shape, const nlohmann::json& settings);

} // namespace headgrad::bench
