// attention_svg.hpp - draws attention weights as heatmaps in plain SVG (like d2l's show_heatmaps).
#pragma once
#include <string>
#include <vector>

#include "framework/tensor.hpp"

namespace headgrad::train {

struct HeatmapGrid {
  std::string title;
  std::vector<std::string> row_titles;    // one per grid row (e.g. "layer 0")
  std::vector<std::string> col_titles;    // one per grid column (e.g. "head 1")
  std::vector<std::vector<Tensor>> maps;  // [row][col], each (queries, keys), values in [0, 1]
  std::vector<std::string> query_labels;  // tokens along each map's rows
  std::vector<std::string> key_labels;    // tokens along each map's columns
};

std::string render_heatmaps_svg(const HeatmapGrid& grid);

} // namespace headgrad::train
