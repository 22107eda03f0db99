// explain_svg.hpp - `headgrad explain --svg FILE`: batch row 0 of the example as heatmaps, one row
// per stage: the projections Q, K and V; per head its slices of Q, K and V, its scores, attention
// weights and output; then transpose_output's concatenation and the output projection. Once
// backward has run, each of these rows has the row of its gradients under it, panel under panel
// (dQ, dK, dV, d scores, d weights, ...). The weights share the 0..1 scale; every other panel is
// drawn on its own signed scale, its range written under it.
#pragma once
#include <string>

#include "train/cli/explain/example.hpp"
#include "train/cli/explain/stages.hpp"
#include "train/heatmap_svg.hpp"

namespace headgrad::cli::explain {

train::HeatmapGrid explain_grid(const Example& e, const Stages& s);
// Writes explain_grid's picture to `path`; throws std::invalid_argument "--svg PATH: cannot write".
void write_explain_svg(const std::string& path, const Example& e, const Stages& s);

} // namespace headgrad::cli::explain
