#include "train/attention_svg.hpp"

#include <fmt/format.h>
#include <stdexcept>

#include "framework/autograd.hpp"
#include "train/heatmap_svg.hpp"

namespace headgrad::train {

void write_attention_svg(models::SequenceModel& model, const data::Batch& eval_set, data::Task task,
                         std::int64_t step, const std::string& path, std::int64_t example) {
  const std::int64_t count = eval_set.tokens.shape()[0];
  if (example < 0 || example >= count)
    throw std::invalid_argument(
        fmt::format("--example {}: the held-out set has examples 0 to {}", example, count - 1));
  const data::Batch one = data::slice_batch(eval_set, example, 1);
  const std::int64_t len = one.valid_lens.to_int_vector()[0], T = model.config.max_len;
  NoGradGuard ng;
  model.eval();
  model.keep_attention_weights(true); // the fused attention path keeps them only when asked
  const Tensor logits = model.forward(one.tokens, one.valid_lens);
  model.keep_attention_weights(false);
  model.train();
  HeatmapGrid grid;
  // which tokens are which: the rows and columns are the input's, the model should output the target
  grid.title = fmt::format("attention weights, task {}, step {}, held-out example {}: input {} (rows: queries, "
                           "columns: keys), target {}, prediction {}",
                           data::task_name(task), step, example, data::format_sequence(one.tokens, 0, len),
                           data::format_sequence(one.targets, 0, len),
                           data::format_sequence(data::argmax_last(logits), 0, len));
  const auto toks = one.tokens.to_int_vector();
  for (std::int64_t j = 0; j < len; ++j) {
    grid.query_labels.push_back(std::to_string(toks[static_cast<std::size_t>(j)]));
    grid.key_labels.push_back(std::to_string(toks[static_cast<std::size_t>(j)]));
  }
  const auto weights = model.attention_weights(); // per layer: (1, H, T, T)
  for (std::size_t l = 0; l < weights.size(); ++l) {
    HeatmapRow row{fmt::format("layer {}", l), {}};
    for (std::int64_t h = 0; h < model.config.heads; ++h)
      // (T, T) of head h, cut to the valid queries x keys
      row.maps.push_back({fmt::format("head {}", h),
                          weights[l].slice(1, h, h + 1).reshape({T, T}).slice(0, 0, len).slice(1, 0, len).contiguous()});
    grid.rows.push_back(std::move(row));
  }
  write_svg_file(path, render_heatmaps_svg(grid));
}

} // namespace headgrad::train
