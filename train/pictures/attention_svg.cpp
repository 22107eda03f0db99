#include "train/pictures/attention_svg.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

#include "framework/core/autograd.hpp"
#include "framework/engine/alloc/caching_allocator.hpp"
#include "train/pictures/heatmap_svg.hpp"

namespace headgrad::train {
namespace {

// "3 9 1 4" for up to 32 tokens, then how many more: a title stays one short line whatever T.
std::string short_sequence(const Tensor& tokens, std::int64_t len) {
  constexpr std::int64_t kShown = 32;
  if (len <= kShown) return data::format_sequence(tokens, 0, len);
  return fmt::format("{} ... ({} tokens)", data::format_sequence(tokens, 0, kShown), len);
}

// The layers drawn when layers x heads_shown maps would be too many: evenly spaced, the first
// and the last among them.
std::vector<std::int64_t> layers_shown(std::int64_t layers, std::int64_t at_most) {
  std::vector<std::int64_t> out;
  if (layers <= at_most) {
    for (std::int64_t l = 0; l < layers; ++l) out.push_back(l);
    return out;
  }
  for (std::int64_t k = 0; k < at_most; ++k) out.push_back(at_most == 1 ? 0 : k * (layers - 1) / (at_most - 1));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

} // namespace

void write_attention_svg(models::TokenModel& model, const data::Batch& example, data::Task task,
                         std::int64_t step, const std::string& path, std::int64_t index) {
  if (!example.tokens.defined() || example.tokens.dim() != 2 || example.tokens.shape()[0] != 1)
    throw std::invalid_argument("write_attention_svg: the example must be a batch of one sequence");
  const std::int64_t len = example.valid_lens.to_int_vector()[0], T = example.tokens.shape()[1];
  NoGradGuard ng;
  model.eval();
  const AllocatorPhase phase; // every layer's (H, T, T) weights: not on top of a training step's cache
  model.keep_attention_weights(true); // the fused attention path keeps them only when asked
  const Tensor logits = model.forward(example.tokens, example.valid_lens);
  model.keep_attention_weights(false);
  model.train();
  const auto weights = model.attention_weights(); // per layer: (1, H, T, T)
  if (weights.empty()) throw std::invalid_argument("write_attention_svg: the model kept no attention weights");
  const std::int64_t H = weights.front().shape()[1], L = static_cast<std::int64_t>(weights.size());
  const std::int64_t heads = std::min(H, kMaxAttentionMaps);
  const std::vector<std::int64_t> layers = layers_shown(L, std::max<std::int64_t>(1, kMaxAttentionMaps / heads));
  HeatmapGrid grid;
  // which tokens are which: the rows and columns are the input's, the model should output the target
  grid.title = fmt::format("attention weights, task {}, step {}, held-out example {}: input {} (rows: queries, "
                           "columns: keys), target {}, prediction {}",
                           data::task_name(task), step, index, short_sequence(example.tokens, len),
                           short_sequence(example.targets, len), short_sequence(data::argmax_last(logits), len));
  if (static_cast<std::int64_t>(layers.size()) < L || heads < H)
    grid.title += fmt::format(" ({} of {} layers, heads 0..{} of {})", layers.size(), L, heads - 1, H);
  const auto toks = example.tokens.to_int_vector();
  if (len <= kMaxHeatmapCells) // labels only where a cell is one position
    for (std::int64_t j = 0; j < len; ++j) {
      grid.query_labels.push_back(std::to_string(toks[static_cast<std::size_t>(j)]));
      grid.key_labels.push_back(std::to_string(toks[static_cast<std::size_t>(j)]));
    }
  for (std::int64_t l : layers) {
    HeatmapRow row{fmt::format("layer {}", l), {}};
    for (std::int64_t h = 0; h < heads; ++h)
      // (T, T) of head h, cut to the valid queries x keys (render_heatmaps_svg caps its cells)
      row.maps.push_back({fmt::format("head {}", h), weights[static_cast<std::size_t>(l)]
                                                         .slice(1, h, h + 1)
                                                         .reshape({T, T})
                                                         .slice(0, 0, len)
                                                         .slice(1, 0, len)
                                                         .contiguous()});
    grid.rows.push_back(std::move(row));
  }
  write_svg_file(path, render_heatmaps_svg(grid));
}

} // namespace headgrad::train
