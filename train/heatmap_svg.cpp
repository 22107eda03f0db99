#include "train/heatmap_svg.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>

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

} // namespace

std::string render_heatmaps_svg(const HeatmapGrid& grid) {
  const int cell = 18, label = 28, gap = 30, top = 50, title_h = 20, left = 90;
  const int rows = static_cast<int>(grid.maps.size());
  int cols = 0;
  for (const auto& r : grid.maps) cols = std::max(cols, static_cast<int>(r.size()));
  // Column widths and row heights from the largest map in each.
  std::vector<int> col_w(static_cast<std::size_t>(cols), 0), row_h(static_cast<std::size_t>(rows), 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < static_cast<int>(grid.maps[r].size()); ++c) {
      const Tensor& m = grid.maps[r][c];
      row_h[r] = std::max(row_h[r], static_cast<int>(m.shape()[0]) * cell);
      col_w[c] = std::max(col_w[c], static_cast<int>(m.shape()[1]) * cell);
    }
  std::vector<int> col_x(static_cast<std::size_t>(cols), left), row_y(static_cast<std::size_t>(rows), top);
  for (int c = 1; c < cols; ++c) col_x[c] = col_x[c - 1] + label + col_w[c - 1] + gap;
  for (int r = 1; r < rows; ++r) row_y[r] = row_y[r - 1] + title_h + label + row_h[r - 1] + gap;
  const int width = (cols ? col_x[cols - 1] + label + col_w[cols - 1] : left) + 80;
  const int height = (rows ? row_y[rows - 1] + title_h + label + row_h[rows - 1] : top) + 40;

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"24\" font-size=\"15\">{}</text>\n",
      width, height, width, height, escape(grid.title));
  for (int r = 0; r < rows; ++r) {
    const int y0 = row_y[r];
    if (r < static_cast<int>(grid.row_titles.size()))
      s += fmt::format("<text x=\"8\" y=\"{}\" font-weight=\"bold\">{}</text>\n", y0 + title_h + label + row_h[r] / 2,
                       escape(grid.row_titles[r]));
    for (int c = 0; c < static_cast<int>(grid.maps[r].size()); ++c) {
      const Tensor& m = grid.maps[r][c];
      const std::int64_t nq = m.shape()[0], nk = m.shape()[1];
      const int mx = col_x[c] + label, my = y0 + title_h + label;
      const std::string col_title = c < static_cast<int>(grid.col_titles.size()) ? grid.col_titles[c] : "";
      const std::string row_title = r < static_cast<int>(grid.row_titles.size()) ? grid.row_titles[r] : "";
      s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", mx, y0 + 12, escape(col_title));
      const auto v = m.to_vector();
      double scale = 0;
      for (double x : v) scale = std::max(scale, std::abs(x));
      if (scale == 0) scale = 1;
      s += fmt::format("<g><title>{} {}</title>\n", escape(row_title), escape(col_title));
      for (std::int64_t i = 0; i < nq; ++i)
        for (std::int64_t j = 0; j < nk; ++j) {
          const double w = v[static_cast<std::size_t>(i * nk + j)];
          s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>[{}, {}] = {:.4f}</title></rect>\n",
                           mx + j * cell, my + i * cell, cell, cell,
                           grid.signed_values ? signed_color(w / scale) : weight_color(w), i, j, w);
        }
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n</g>\n", mx,
                       my, nk * cell, nq * cell);
      for (std::int64_t j = 0; j < nk && j < static_cast<std::int64_t>(grid.key_labels.size()); ++j)
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", mx + j * cell + cell / 2, my - 6,
                         escape(grid.key_labels[static_cast<std::size_t>(j)]));
      for (std::int64_t i = 0; i < nq && i < static_cast<std::int64_t>(grid.query_labels.size()); ++i)
        s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", mx - 4, my + i * cell + cell / 2 + 4,
                         escape(grid.query_labels[static_cast<std::size_t>(i)]));
    }
  }
  // colour key
  const int bx = width - 44, by = top + 10;
  for (int k = 0; k < 10; ++k) {
    const double t = k / 9.0;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"{}\"/>\n", bx, by + (9 - k) * 12,
                     grid.signed_values ? signed_color(2 * t - 1) : weight_color(t));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text><text x=\"{}\" y=\"{}\">{}</text>\n", bx + 18, by + 10,
                   grid.signed_values ? "+max" : "1", bx + 18, by + 120, grid.signed_values ? "-max" : "0");
  s += "</svg>\n";
  return s;
}

void write_svg_file(const std::string& path, const std::string& svg) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << svg;
    if (!f) throw std::runtime_error(fmt::format("{}: cannot write", path));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot write ({})", path, ec.message()));
}

} // namespace headgrad::train
