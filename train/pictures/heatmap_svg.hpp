// heatmap_svg.hpp - a grid of heatmaps in plain SVG (like d2l's show_heatmaps): the trainer's
// attention.svg and `headgrad explain --svg` draw with it.
#pragma once
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"
#include "train/pictures/svg_file.hpp" // write_svg_file

namespace headgrad::train {

// How a map's values become colours.
enum class HeatmapScale {
  grid,    // as the grid says (signed_values)
  weights, // values in [0, 1] (attention weights): white..blue, one scale shared by all such maps
  own_signed, // its own signed scale: blue (-max) .. white (0) .. red (+max), max = its largest |value|
};

struct Heatmap {
  std::string title; // above the map, e.g. "head 1"; '\n' starts a second line
  Tensor values;     // 2-D (rows, cols)
  HeatmapScale scale = HeatmapScale::grid;
  // bool (rows, cols), or undefined: true marks an entry the mask removed (a key its query does
  // not keep); it is hatched, so a masked entry never looks like a computed value near zero
  Tensor masked = Tensor();
};

// Maps of at most this many rows and columns print each value in its cell when the grid asks.
constexpr std::int64_t kHeatmapNumbersMax = 8;

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
  // scale, blue (most negative) .. white (0) .. red (most positive), with its range under it, and
  // the legend says so; hover shows the raw value. A map's own `scale` overrides this.
  bool signed_values = false;
  // Signed maps on one shared scale (max = the largest |value| over all of them) instead of
  // each on its own: colours then compare across panels.
  bool shared_scale = false;
  // Each value printed in its cell (2 decimals), in maps of at most kHeatmapNumbersMax x
  // kHeatmapNumbersMax; a masked entry shows its number only when it is not 0.
  bool numbers = false;
};

// The most cells a map is drawn with along each axis. A larger map (a T x T attention map of a
// long sequence) is drawn as block averages, each cell the mean of a block of
// ceil(rows / kMaxHeatmapCells) x ceil(cols / kMaxHeatmapCells) values, and its title says so; a
// picture's bytes and drawing time then depend on the number of maps, not on their sizes.
inline constexpr std::int64_t kMaxHeatmapCells = 64;

// `values` (2-D, float32 or float64) averaged over blocks of block_rows x block_cols =
// ceil(rows / max_cells) x ceil(cols / max_cells) values, so that it has at most max_cells rows
// and columns (the last block of a row or column holds what is left and is averaged over that).
// A map that fits is returned as it is, with blocks of 1 x 1.
struct BlockAverages {
  Tensor values; // (ceil(rows / block_rows), ceil(cols / block_cols)), float64 when averaged
  std::int64_t block_rows = 1, block_cols = 1;
};
BlockAverages block_averages(const Tensor& values, std::int64_t max_cells = kMaxHeatmapCells);

// The SVG of the grid, each map capped at kMaxHeatmapCells x kMaxHeatmapCells cells (above).
// Labels along a map's axes are drawn only for a map shown cell for cell.
std::string render_heatmaps_svg(const HeatmapGrid& grid);

} // namespace headgrad::train
