// heatmap_svg.hpp - a grid of heatmaps in plain SVG (like d2l's show_heatmaps): the trainer's
// attention.svg and `headgrad explain --svg` draw with it.
#pragma once
#include <string>
#include <vector>

#include "framework/tensor.hpp"
#include "train/svg_file.hpp" // write_svg_file

namespace headgrad::train {

struct Heatmap {
  std::string title; // above the map, e.g. "head 1"
  Tensor values;     // 2-D (rows, cols)
};

struct HeatmapRow {
  std::string title; // left of the row, e.g. "layer 0"
  std::vector<Heatmap> maps; // sizes may differ
};

struct HeatmapGrid {
  std::string title;
  std::vector<HeatmapRow> rows;
  std::vector<std::string> query_labels; // labels along each map's rows (optional)
  std::vector<std::string> key_labels;   // labels along each map's columns (optional)
  // false: values are weights in [0, 1], drawn white..blue. true: each map is drawn on its own
  // scale, blue (most negative) .. white (0) .. red (most positive), and the legend says so;
  // hover shows the raw value.
  bool signed_values = false;
};

std::string render_heatmaps_svg(const HeatmapGrid& grid);

} // namespace headgrad::train
