#include "train/attention_svg.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace headgrad::train {
namespace {

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// White (0) to dark blue (1), the Blues-like ramp d2l's heatmaps use.
std::string color(double v) {
  v = std::clamp(std::isfinite(v) ? v : 0.0, 0.0, 1.0);
  const int r = static_cast<int>(std::lround(247 - v * (247 - 8)));
  const int g = static_cast<int>(std::lround(251 - v * (251 - 48)));
  const int b = static_cast<int>(std::lround(255 - v * (255 - 107)));
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

} // namespace

std::string render_heatmaps_svg(const HeatmapGrid& grid) {
  const int rows = static_cast<int>(grid.maps.size());
  const int cols = rows ? static_cast<int>(grid.maps[0].size()) : 0;
  const std::int64_t nq = rows && cols ? grid.maps[0][0].shape()[0] : 0;
  const std::int64_t nk = rows && cols ? grid.maps[0][0].shape()[1] : 0;
  const int cell = 18, label = 28, gap = 30, top = 50, title_h = 20;
  const int map_w = static_cast<int>(nk) * cell, map_h = static_cast<int>(nq) * cell;
  const int left = 70;
  const int width = left + cols * (label + map_w + gap) + 60;
  const int height = top + rows * (title_h + label + map_h + gap) + 40;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n",
      width, height, width, height, left, escape(grid.title));
  for (int r = 0; r < rows; ++r) {
    const int y0 = top + r * (title_h + label + map_h + gap);
    if (r < static_cast<int>(grid.row_titles.size()))
      s += fmt::format("<text x=\"8\" y=\"{}\" font-weight=\"bold\">{}</text>\n", y0 + title_h + label + map_h / 2,
                       escape(grid.row_titles[r]));
    for (int c = 0; c < cols; ++c) {
      const int x0 = left + c * (label + map_w + gap);
      if (c < static_cast<int>(grid.col_titles.size()))
        s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", x0 + label, y0 + 12, escape(grid.col_titles[c]));
      const int mx = x0 + label, my = y0 + title_h + label;
      const auto v = grid.maps[r][c].to_vector();
      s += fmt::format("<g><title>{} {}</title>\n", r < (int)grid.row_titles.size() ? escape(grid.row_titles[r]) : "",
                       c < (int)grid.col_titles.size() ? escape(grid.col_titles[c]) : "");
      for (std::int64_t i = 0; i < nq; ++i)
        for (std::int64_t j = 0; j < nk; ++j) {
          const double w = v[static_cast<std::size_t>(i * nk + j)];
          s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>q{} k{}: {:.3f}</title></rect>\n",
                           mx + j * cell, my + i * cell, cell, cell, color(w), i, j, w);
        }
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n</g>\n", mx,
                       my, map_w, map_h);
      for (std::int64_t j = 0; j < nk && j < static_cast<std::int64_t>(grid.key_labels.size()); ++j)
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", mx + j * cell + cell / 2, my - 6,
                         escape(grid.key_labels[static_cast<std::size_t>(j)]));
      for (std::int64_t i = 0; i < nq && i < static_cast<std::int64_t>(grid.query_labels.size()); ++i)
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", mx - 4, my + i * cell + cell / 2 + 4,
                         escape(grid.query_labels[static_cast<std::size_t>(i)]));
    }
  }
  // colour bar
  const int bx = width - 40, by = top + 10;
  for (int k = 0; k < 10; ++k)
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{}\"/>\n", bx, by + (9 - k) * 12,
                     color(k / 9.0));
  s += fmt::format("<text x=\"{}\" y=\"{}\">1</text><text x=\"{}\" y=\"{}\">0</text>\n", bx + 18, by + 10, bx + 18,
                   by + 120);
  s += "</svg>\n";
  return s;
}

} // namespace headgrad::train
