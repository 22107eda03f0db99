// bench_table.hpp - the table headgrad_bench prints: per configuration and measurement, headgrad
// and PyTorch side by side with their ratio, each target with its status (ok / MISS / n/a),
// failures as notes under it, then headgrad's profile per configuration.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_options.hpp"

namespace headgrad::bench {

// From the results the run collected in `result` ("headgrad", "torch", "configs",
// "time_to_accuracy", "soak", load averages, "wall_seconds"); adds result["targets"].
std::string render_table(const BenchOptions& o, nlohmann::json& result);

} // namespace headgrad::bench
