// heatmap_svg.hpp - heatmaps in plain SVG (like d2l's show_heatmaps): the trainer's attention
// picture and `headgrad explain --svg` draw with it.
#pragma once
#include <string>
#include <vector>

#include "framework/tensor.hpp"

namespace headgrad::train {

struct HeatmapGrid {
  std::string title;
  std::vector<std::string> row_titles;    // one per grid row (e.g. "layer 0")
  std::vector<std::string> col_titles;    // one per grid column (e.g. "head 1")
  std::vector<std::vector<Tensor>> maps;  // [row][col], each 2-D (rows, cols); sizes may differ
  std::vector<std::string> query_labels;  // labels along each map's rows (optional)
  std::vector<std::string> key_labels;    // labels along each map's columns (optional)
  // false: values are weights in [0, 1], drawn white..blue. true: each map is drawn on its own
  // scale, blue (most negative) .. white (0) .. red (most positive); hover shows the raw value.
  bool signed_values = false;
};

std::string render_heatmaps_svg(const HeatmapGrid& grid);

// Writes `svg` to `path` through a temporary file renamed into place, so a reader never sees a
// half-written picture. Throws std::runtime_error naming the path if it cannot.
void write_svg_file(const std::string& path, const std::string& svg);

} // namespace headgrad::train
