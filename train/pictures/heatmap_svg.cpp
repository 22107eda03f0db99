#include "train/pictures/heatmap_svg.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::train {
namespace {

constexpr int kCell = 18, kLabel = 28, kGap = 30, kTop = 50, kTitleH = 20, kLeft = 90, kScaleH = 22;
constexpr int kLegendW = 90, kLegendH = 330; // the keys' column at the right edge

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

bool is_signed(const HeatmapGrid& grid, const Heatmap& map) {
  return map.scale == HeatmapScale::own_signed || (map.scale == HeatmapScale::grid && grid.signed_values);
}

// A cell's size: wide enough for its number when the map prints them.
struct Cell {
  int w, h;
};
bool shows_numbers(const HeatmapGrid& grid, const Heatmap& map) {
  return grid.numbers && map.values.shape()[0] <= kHeatmapNumbersMax && map.values.shape()[1] <= kHeatmapNumbersMax;
}
Cell cell_of(const HeatmapGrid& grid, const Heatmap& map) {
  return shows_numbers(grid, map) ? Cell{34, 20} : Cell{kCell, kCell};
}

// v with `decimals` decimals; a value that rounds to zero is "0.00", never "-0.00".
std::string fixed(double v, int decimals) {
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

// The largest |value| of a map, 1 for an all-zero map (its colours are then white).
double max_abs(const Heatmap& map) {
  double m = 0;
  for (double a : map.values.to_vector()) m = std::max(m, std::abs(a));
  return m == 0 ? 1 : m;
}

// The colour scale of a signed map: its own largest |value|, or the grid's shared one.
double signed_scale(const HeatmapGrid& grid, const Heatmap& map) {
  if (!grid.shared_scale) return max_abs(map);
  double m = 0;
  for (const auto& row : grid.rows)
    for (const auto& other : row.maps)
      if (is_signed(grid, other)) m = std::max(m, max_abs(other));
  return m;
}

bool any_masked(const HeatmapGrid& grid) {
  for (const auto& row : grid.rows)
    for (const auto& map : row.maps)
      if (map.masked.defined()) return true;
  return false;
}

std::vector<std::string> title_lines(const std::string& title) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl = title.find('\n'); nl != std::string::npos; nl = title.find('\n', start)) {
    lines.push_back(title.substr(start, nl - start));
    start = nl + 1;
  }
  lines.push_back(title.substr(start));
  return lines;
}

// About the width of `text` at font-size 11 (sans-serif averages under 6.5 px a character).
int text_width(const std::string& text) { return static_cast<int>(text.size()) * 13 / 2; }

// Where each grid column and row starts: column widths from their widest map or title, row heights
// from their tallest map, their longest title and, with signed maps, the range bar under each.
struct Layout {
  std::vector<int> col_x, row_y, row_h, title_h;
  int width = 0, height = 0;
};

Layout layout_of(const HeatmapGrid& grid) {
  const std::size_t rows = grid.rows.size();
  std::size_t cols = 0;
  for (const auto& r : grid.rows) cols = std::max(cols, r.maps.size());
  std::vector<int> col_w(cols, 0);
  int left = kLeft; // room for the row titles
  for (const auto& r : grid.rows) left = std::max(left, text_width(r.title) + 4);
  Layout l{std::vector<int>(cols, left), std::vector<int>(rows, kTop), std::vector<int>(rows, 0),
           std::vector<int>(rows, kTitleH)};
  for (std::size_t r = 0; r < rows; ++r) {
    int bar = 0;
    for (std::size_t c = 0; c < grid.rows[r].maps.size(); ++c) {
      const Heatmap& map = grid.rows[r].maps[c];
      const Tensor& m = map.values;
      const Cell cell = cell_of(grid, map);
      l.row_h[r] = std::max(l.row_h[r], static_cast<int>(m.shape()[0]) * cell.h);
      col_w[c] = std::max(col_w[c], static_cast<int>(m.shape()[1]) * cell.w);
      const auto lines = title_lines(map.title);
      for (const auto& line : lines) col_w[c] = std::max(col_w[c], text_width(line) - kLabel);
      l.title_h[r] = std::max(l.title_h[r], kTitleH + 14 * (static_cast<int>(lines.size()) - 1));
      if (is_signed(grid, map)) bar = kScaleH;
    }
    l.row_h[r] += bar;
  }
  for (std::size_t c = 1; c < cols; ++c) l.col_x[c] = l.col_x[c - 1] + kLabel + col_w[c - 1] + kGap;
  for (std::size_t r = 1; r < rows; ++r) l.row_y[r] = l.row_y[r - 1] + l.title_h[r - 1] + kLabel + l.row_h[r - 1] + kGap;
  l.width = (cols ? l.col_x[cols - 1] + kLabel + col_w[cols - 1] : left) + kLegendW;
  l.height = (rows ? l.row_y[rows - 1] + l.title_h[rows - 1] + kLabel + l.row_h[rows - 1] : kTop) + 48 +
             (any_masked(grid) ? 16 : 0); // room for the hatching's line of the legend
  l.height = std::max(l.height, kTop + kLegendH);
  return l;
}

// A signed map's own scale under it: a colour bar from -max to +max with the numbers.
std::string range_bar_svg(int x, int y, int width, double max) {
  std::string s = "<g class=\"range\">\n";
  const int w = std::max(width, 90), step = w / 9;
  for (int k = 0; k < 9; ++k)
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"6\" fill=\"{}\"/>\n", x + k * step, y, step,
                     signed_color(k / 4.0 - 1));
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"9\">-{:.2g}</text><text x=\"{}\" y=\"{}\" font-size=\"9\" "
                   "text-anchor=\"middle\">0</text><text x=\"{}\" y=\"{}\" font-size=\"9\" text-anchor=\"end\">+{:.2g}</text>\n",
                   x, y + 16, max, x + 9 * step / 2, y + 16, x + 9 * step, y + 16, max);
  return s + "</g>\n";
}

// One map with its title, its cells (hover: the value), its labels and, when signed, its range;
// (x, y) is its title's corner and title_h the height of its row's titles. `blocks`: the map is
// block averages of blocks this large (1 x 1: the values themselves).
std::string map_svg(const HeatmapGrid& grid, const std::string& row_title, const Heatmap& map, int x, int y,
                    int title_h, std::int64_t block_rows, std::int64_t block_cols) {
  const std::int64_t nq = map.values.shape()[0], nk = map.values.shape()[1];
  const int mx = x + kLabel, my = y + title_h + kLabel;
  const auto lines = title_lines(map.title);
  std::string s, flat;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", mx, y + 12 + 14 * static_cast<int>(i), xml_escape(lines[i]));
    flat += (i ? " " : "") + lines[i];
  }
  const auto v = map.values.to_vector();
  const std::vector<std::int64_t> masked =
      map.masked.defined() ? map.masked.to_int_vector() : std::vector<std::int64_t>{};
  const bool own = is_signed(grid, map), numbers = shows_numbers(grid, map);
  const double scale = own ? signed_scale(grid, map) : 1; // signed: the largest |value| at full colour
  const Cell cell = cell_of(grid, map);
  s += fmt::format("<g><title>{} {}</title>\n", xml_escape(row_title), xml_escape(flat));
  const bool averaged = block_rows > 1 || block_cols > 1;
  for (std::int64_t i = 0; i < nq; ++i)
    for (std::int64_t j = 0; j < nk; ++j) {
      const auto at = static_cast<std::size_t>(i * nk + j);
      const double w = v[at];
      const bool is_masked = !masked.empty() && masked[at] != 0;
      const int x0 = mx + static_cast<int>(j) * cell.w, y0 = my + static_cast<int>(i) * cell.h;
      const std::string where =
          averaged ? fmt::format("mean of rows {}..{}, columns {}..{}", i * block_rows, (i + 1) * block_rows - 1,
                                 j * block_cols, (j + 1) * block_cols - 1)
                   : fmt::format("[{}, {}]", i, j);
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{} = {}{}</title></rect>\n", x0, y0,
          cell.w, cell.h, own ? signed_color(w / scale) : weight_color(w), where, fixed(w, 4),
          is_masked ? " (masked)" : "");
      if (is_masked)
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#masked)\"/>\n", x0, y0, cell.w,
                         cell.h);
      if (numbers && !(is_masked && w == 0)) {
        const double level = own ? std::abs(w) / scale : w; // dark cells get white text
        s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"8\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                         x0 + cell.w / 2, y0 + cell.h / 2 + 3, level > 0.6 ? "white" : "black", fixed(w, 2));
      }
    }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n</g>\n", mx, my,
                   nk * cell.w, nq * cell.h);
  if (own) s += range_bar_svg(mx, my + static_cast<int>(nq) * cell.h + 6, static_cast<int>(nk) * cell.w, scale);
  if (averaged) return s; // a label would name one position of a block
  for (std::int64_t j = 0; j < nk && j < static_cast<std::int64_t>(grid.key_labels.size()); ++j)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", mx + j * cell.w + cell.w / 2, my - 6,
                     xml_escape(grid.key_labels[static_cast<std::size_t>(j)]));
  for (std::int64_t i = 0; i < nq && i < static_cast<std::int64_t>(grid.query_labels.size()); ++i)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", mx - 4, my + i * cell.h + cell.h / 2 + 4,
                     xml_escape(grid.query_labels[static_cast<std::size_t>(i)]));
  return s;
}

// A colour key at the right edge: ten steps from `low` (bottom) to `high` (top), under a caption.
std::string key_svg(int x, int y, const char* caption, const char* high, const char* low, bool signed_scale) {
  std::string s = fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", x, y, caption);
  for (int k = 0; k < 10; ++k) {
    const double t = k / 9.0;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{}\"/>\n", x, y + 8 + (9 - k) * 12,
                     signed_scale ? signed_color(2 * t - 1) : weight_color(t));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\">{}</text>\n", x + 18, y + 18, high, x + 18,
                   y + 128, low);
  return s;
}

// One key per colour scale in the picture: the weights' shared 0..1, and the signed scale (each
// signed panel's own max is under the panel); for signed maps also two lines under the grid
// saying that every panel has its own scale (the same colour means different values in
// different panels).
std::string legend_svg(const HeatmapGrid& grid, int width, int height) {
  bool weights = false, own = false;
  for (const auto& row : grid.rows)
    for (const auto& map : row.maps) (is_signed(grid, map) ? own : weights) = true;
  std::string s;
  if (own && grid.shared_scale)
    s += fmt::format("<text x=\"10\" y=\"{}\">one signed colour scale for every panel:</text>\n"
                     "<text x=\"10\" y=\"{}\">blue = -max, white = 0, red = +max, max = the largest |value| in "
                     "any panel (written under each)</text>\n",
                     height - 24, height - 10);
  else if (own)
    s += fmt::format("<text x=\"10\" y=\"{}\">each panel has its own signed colour scale:</text>\n"
                     "<text x=\"10\" y=\"{}\">blue = -max, white = 0, red = +max, max = the largest |value| in "
                     "that panel (written under it)</text>\n",
                     height - 24, height - 10);
  if (any_masked(grid))
    s += fmt::format("<rect x=\"10\" y=\"{}\" width=\"12\" height=\"10\" fill=\"url(#masked)\"/><text x=\"26\" "
                     "y=\"{}\">hatched: masked, an entry the mask removed (a key its query does not keep), not a "
                     "computed value near 0</text>\n",
                     height - 47, height - 38);
  const int x = width - kLegendW + 24;
  int y = kTop + 10;
  if (weights || !own) {
    s += key_svg(x, y, "weights", "1", "0", false);
    y += 160;
  }
  if (own) s += key_svg(x, y, "signed", "+max", "-max", true);
  return s;
}

// The grid with every map capped at kMaxHeatmapCells cells a side (block averages, said in the
// map's title), and the block sizes of each map, row by row.
struct Bounded {
  HeatmapGrid grid;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> blocks;
};

Bounded bounded(const HeatmapGrid& given) {
  Bounded b;
  b.grid = given; // every setting; the maps' tensors are shared, not copied
  for (HeatmapRow& row : b.grid.rows) {
    auto& blocks = b.blocks.emplace_back();
    for (Heatmap& map : row.maps) {
      BlockAverages a = block_averages(map.values);
      if (a.block_rows > 1 || a.block_cols > 1) {
        map.title += fmt::format("\n{} x {}, shown as means of {} x {} blocks", map.values.shape()[0],
                                 map.values.shape()[1], a.block_rows, a.block_cols);
        map.values = std::move(a.values);
        map.masked = Tensor(); // a block mixes kept and masked entries: its mean is what it shows
      }
      blocks.emplace_back(a.block_rows, a.block_cols);
    }
  }
  return b;
}

} // namespace

BlockAverages block_averages(const Tensor& values, std::int64_t max_cells) {
  if (values.dim() != 2)
    throw std::invalid_argument(fmt::format("block_averages: expected a 2-D map, got shape {}", values.shape()));
  if (max_cells < 1) throw std::invalid_argument(fmt::format("block_averages: max_cells must be >= 1, got {}", max_cells));
  const std::int64_t rows = values.shape()[0], cols = values.shape()[1];
  if (rows <= max_cells && cols <= max_cells) return {values, 1, 1};
  const std::int64_t br = (rows + max_cells - 1) / max_cells, bc = (cols + max_cells - 1) / max_cells;
  const std::int64_t out_rows = (rows + br - 1) / br, out_cols = (cols + bc - 1) / bc;
  std::vector<double> sum(static_cast<std::size_t>(out_rows * out_cols), 0.0);
  const Tensor c = values.contiguous();
  dispatch_float(c.dtype(), "block_averages", [&]<typename T>() {
    const T* p = c.data<T>();
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) sum[static_cast<std::size_t>(i / br * out_cols + j / bc)] += p[i * cols + j];
  });
  for (std::int64_t i = 0; i < out_rows; ++i)
    for (std::int64_t j = 0; j < out_cols; ++j) {
      const std::int64_t n = (std::min(rows, (i + 1) * br) - i * br) * (std::min(cols, (j + 1) * bc) - j * bc);
      sum[static_cast<std::size_t>(i * out_cols + j)] /= static_cast<double>(n);
    }
  return {Tensor::from(sum, {out_rows, out_cols}, DType::f64), br, bc};
}

std::string render_heatmaps_svg(const HeatmapGrid& given) {
  const Bounded b = bounded(given);
  const HeatmapGrid& grid = b.grid;
  const Layout l = layout_of(grid);
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"24\" font-size=\"15\">{}</text>\n",
      l.width, l.height, l.width, l.height, xml_escape(grid.title));
  if (any_masked(grid)) // the hatching of masked entries: grey stripes over a light grey
    s += "<defs><pattern id=\"masked\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/><line x1=\"0\" y1=\"0\" "
         "x2=\"0\" y2=\"6\" stroke=\"#8a8a8a\" stroke-width=\"2\"/></pattern></defs>\n";
  for (std::size_t r = 0; r < grid.rows.size(); ++r) {
    const HeatmapRow& row = grid.rows[r];
    s += fmt::format("<text x=\"8\" y=\"{}\" font-weight=\"bold\">{}</text>\n",
                     l.row_y[r] + l.title_h[r] + kLabel + l.row_h[r] / 2, xml_escape(row.title));
    for (std::size_t c = 0; c < row.maps.size(); ++c)
      s += map_svg(grid, row.title, row.maps[c], l.col_x[c], l.row_y[r], l.title_h[r], b.blocks[r][c].first,
                   b.blocks[r][c].second);
  }
  s += legend_svg(grid, l.width, l.height);
  s += "</svg>\n";
  return s;
}

} // namespace headgrad::train
