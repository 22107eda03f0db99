// attention_svg.hpp - the picture `headgrad train` leaves in its output directory: every layer's
// and head's attention weights on the first held-out sequence (like d2l's show_heatmaps);
// `headgrad eval --svg FILE --example N` draws it for any held-out sequence.
#pragma once
#include <cstdint>
#include <string>

#include "data/tasks.hpp"
#include "models/transformer.hpp"

namespace headgrad::train {

// Runs `model` (in eval mode, without a graph) on sequence `example` of `eval_set` and writes
// one heatmap per (layer, head), cut to the sequence's valid queries x keys, to `path`. Throws
// std::invalid_argument if there is no such example.
void write_attention_svg(models::SequenceModel& model, const data::Batch& eval_set, data::Task task,
                         std::int64_t step, const std::string& path, std::int64_t example = 0);

} // namespace headgrad::train
