// attention_svg.hpp - the picture `headgrad train` leaves in its output directory: every layer's
// and head's attention weights on the first held-out sequence (like d2l's show_heatmaps);
// `headgrad eval --svg FILE --example N` draws it for any held-out sequence.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tasks.hpp"
#include "models/token_model.hpp"

namespace headgrad::train {

// Runs `model` (in eval mode, without a graph) on `example`, a batch of one sequence (held-out
// example `index`: TaskData::eval_example), and writes one heatmap per (layer, head), cut to the
// sequence's valid queries x keys, to `path`. Bounded whatever T and the model's size: each map
// has at most kMaxHeatmapCells x kMaxHeatmapCells cells (block averages beyond, said in its
// title, train/pictures/heatmap_svg.hpp), and at most kMaxAttentionMaps maps are drawn (evenly spaced
// layers, the first heads; the title says which). Throws std::invalid_argument unless `example`
// has one row.
void write_attention_svg(models::TokenModel& model, const data::Batch& example, data::Task task,
                         std::int64_t step, const std::string& path, std::int64_t index = 0);

// The most heatmaps attention.svg draws (layers x heads).
inline constexpr std::int64_t kMaxAttentionMaps = 32;

} // namespace headgrad::train
