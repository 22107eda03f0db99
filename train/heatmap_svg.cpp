#include "train/heatmap_svg.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace headgrad::train {
namespace {

constexpr int kCell = 18, kLabel = 28, kGap = 30, kTop = 50, kTitleH = 20, kLeft = 90;

std::string rgb(double r, double g, double b) {
  return fmt::format("#{:02x}{:02x}{:02x}", static_cast<int>(std::lround(r)), static_cast<int>(std::lround(g)),
                     static_cast<int>(std::lround(b)));
}

// White (0) to dark blue (1), the Blues-like ramp d2l's heatmaps use.
std::string weight_color(double v) {
  v = std::clamp(std::isfinite(v) ? v : 0.0, 0.0, 1.0);
  return rgb(247 - v * (247 - 8), 251 - v * (251 - 48), 255 - v * (255 - 107));
}

// -1 blue, 0 white, +1 red.
std::string signed_color(double v) {
  v = std::clamp(std::isfinite(v) ? v : 0.0, -1.0, 1.0);
  if (v >= 0) return rgb(255, 255 - v * (255 - 60), 255 - v * (255 - 50));
  return rgb(255 + v * (255 - 40), 255 + v * (255 - 90), 255);
}

// Where each grid column and row starts: column widths and row heights from their largest map.
struct Layout {
  std::vector<int> col_x, row_y, row_h;
  int width = 0, height = 0;
};

Layout layout_of(const HeatmapGrid& grid) {
  const std::size_t rows = grid.rows.size();
  std::size_t cols = 0;
  for (const auto& r : grid.rows) cols = std::max(cols, r.maps.size());
  std::vector<int> col_w(cols, 0);
  Layout l{std::vector<int>(cols, kLeft), std::vector<int>(rows, kTop), std::vector<int>(rows, 0)};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < grid.rows[r].maps.size(); ++c) {
      const Tensor& m = grid.rows[r].maps[c].values;
      l.row_h[r] = std::max(l.row_h[r], static_cast<int>(m.shape()[0]) * kCell);
      col_w[c] = std::max(col_w[c], static_cast<int>(m.shape()[1]) * kCell);
    }
  for (std::size_t c = 1; c < cols; ++c) l.col_x[c] = l.col_x[c - 1] + kLabel + col_w[c - 1] + kGap;
  for (std::size_t r = 1; r < rows; ++r) l.row_y[r] = l.row_y[r - 1] + kTitleH + kLabel + l.row_h[r - 1] + kGap;
  l.width = (cols ? l.col_x[cols - 1] + kLabel + col_w[cols - 1] : kLeft) + 80;
  l.height = (rows ? l.row_y[rows - 1] + kTitleH + kLabel + l.row_h[rows - 1] : kTop) + 40;
  return l;
}

// One map with its title, its cells (hover: the value) and its labels; (x, y) is its title's corner.
std::string map_svg(const HeatmapGrid& grid, const std::string& row_title, const Heatmap& map, int x, int y) {
  const std::int64_t nq = map.values.shape()[0], nk = map.values.shape()[1];
  const int mx = x + kLabel, my = y + kTitleH + kLabel;
  std::string s = fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", mx, y + 12, xml_escape(map.title));
  const auto v = map.values.to_vector();
  double scale = 0; // signed maps: each on its own scale, the largest |value| at full colour
  for (double a : v) scale = std::max(scale, std::abs(a));
  if (scale == 0) scale = 1;
  s += fmt::format("<g><title>{} {}</title>\n", xml_escape(row_title), xml_escape(map.title));
  for (std::int64_t i = 0; i < nq; ++i)
    for (std::int64_t j = 0; j < nk; ++j) {
      const double w = v[static_cast<std::size_t>(i * nk + j)];
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>[{}, {}] = {:.4f}</title></rect>\n",
                       mx + j * kCell, my + i * kCell, kCell, kCell,
                       grid.signed_values ? signed_color(w / scale) : weight_color(w), i, j, w);
    }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n</g>\n", mx, my,
                   nk * kCell, nq * kCell);
  for (std::int64_t j = 0; j < nk && j < static_cast<std::int64_t>(grid.key_labels.size()); ++j)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", mx + j * kCell + kCell / 2, my - 6,
                     xml_escape(grid.key_labels[static_cast<std::size_t>(j)]));
  for (std::int64_t i = 0; i < nq && i < static_cast<std::int64_t>(grid.query_labels.size()); ++i)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", mx - 4, my + i * kCell + kCell / 2 + 4,
                     xml_escape(grid.query_labels[static_cast<std::size_t>(i)]));
  return s;
}

// The colour key at the right edge; for signed maps also two lines under the grid saying that
// every panel has its own scale (the same colour means different values in different panels).
std::string legend_svg(const HeatmapGrid& grid, int width, int height) {
  std::string s;
  if (grid.signed_values)
    s += fmt::format("<text x=\"10\" y=\"{}\">each panel has its own signed colour scale:</text>\n"
                     "<text x=\"10\" y=\"{}\">blue = -max, white = 0, red = +max, max = the largest |value| in "
                     "that panel</text>\n",
                     height - 24, height - 10);
  const int bx = width - 44, by = kTop + 10;
  for (int k = 0; k < 10; ++k) {
    const double t = k / 9.0;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{}\"/>\n", bx, by + (9 - k) * 12,
                     grid.signed_values ? signed_color(2 * t - 1) : weight_color(t));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\">{}</text>\n", bx + 18, by + 10,
                   grid.signed_values ? "+max" : "1", bx + 18, by + 120, grid.signed_values ? "-max" : "0");
  return s;
}

} // namespace

std::string render_heatmaps_svg(const HeatmapGrid& grid) {
  const Layout l = layout_of(grid);
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"24\" font-size=\"15\">{}</text>\n",
      l.width, l.height, l.width, l.height, xml_escape(grid.title));
  for (std::size_t r = 0; r < grid.rows.size(); ++r) {
    const HeatmapRow& row = grid.rows[r];
    s += fmt::format("<text x=\"8\" y=\"{}\" font-weight=\"bold\">{}</text>\n",
                     l.row_y[r] + kTitleH + kLabel + l.row_h[r] / 2, xml_escape(row.title));
    for (std::size_t c = 0; c < row.maps.size(); ++c) s += map_svg(grid, row.title, row.maps[c], l.col_x[c], l.row_y[r]);
  }
  s += legend_svg(grid, l.width, l.height);
  s += "</svg>\n";
  return s;
}

} // namespace headgrad::train
