// explain_svg.hpp - `headgrad explain --svg FILE`: batch row 0 of the example as heatmaps, one row
// per stage: the projections Q, K and V; per head its slices of Q, K and V, its scores, attention
// weights and output; then transpose_output's concatenation and the output projection. Once
// backward has run, each of these rows has the row of its gradients under it, panel under panel
// (dQh, dKh, dVh, dS, dP, ...), in the walkthrough's notation. The weights P share the 0..1 scale;
// every other panel is drawn on a signed scale, its own or (shared_scale) one for all, its range
// written under it. Panels up to 8 x 8 print their numbers; entries the mask removes (in S, P, A and
// dS) are hatched.
#pragma once
#include <string>

#include "train/explain/example.hpp"
#include "train/explain/stages.hpp"
#include "train/pictures/heatmap_svg.hpp"

namespace headgrad::cli::explain {

train::HeatmapGrid explain_grid(const Example& e, const Stages& s, bool shared_scale = false);
// Writes explain_grid's picture to `path`; throws std::invalid_argument "--svg PATH: cannot write".
void write_explain_svg(const std::string& path, const Example& e, const Stages& s, bool shared_scale = false);

} // namespace headgrad::cli::explain
