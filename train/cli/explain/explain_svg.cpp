#include "train/cli/explain/explain_svg.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::cli::explain {

train::HeatmapGrid explain_grid(const Example& e, const Stages& s) {
  const std::int64_t Tq = e.Tq, Tk = e.Tk, h = e.h, d = e.d;
  train::HeatmapGrid grid;
  grid.title = fmt::format("multi-head attention, batch row 0: {} heads of d = {}, valid_lens [{}]", e.H, d,
                           fmt::join(e.valid_lens.to_int_vector(), ", "));
  grid.signed_values = true;
  grid.rows.push_back({"projections",
                       {{"Q (Tq x num_hiddens)", s.Q.slice(0, 0, 1).reshape({Tq, h})},
                        {"K (Tk x num_hiddens)", s.K.slice(0, 0, 1).reshape({Tk, h})}}});
  // rows of transpose_qkv's output for batch row 0 are 0*H + hh
  for (std::int64_t hh = 0; hh < e.H; ++hh)
    grid.rows.push_back({fmt::format("head {} (cols {}..{})", hh, hh * d, hh * d + d - 1),
                         {{"Q head (Tq x d)", s.Qh.slice(0, hh, hh + 1).reshape({Tq, d})},
                          {"K head (Tk x d)", s.Kh.slice(0, hh, hh + 1).reshape({Tk, d})},
                          {"weights (Tq x Tk)", s.weights.slice(0, hh, hh + 1).reshape({Tq, Tk})},
                          {"head output (Tq x d)", s.heads_out.slice(0, hh, hh + 1).reshape({Tq, d})}}});
  grid.rows.push_back({"output",
                       {{"concat (Tq x num_hiddens)", s.concat.slice(0, 0, 1).reshape({Tq, h})},
                        {"W_o(concat) (Tq x num_hiddens)", s.output.slice(0, 0, 1).reshape({Tq, h})}}});
  return grid;
}

void write_explain_svg(const std::string& path, const Example& e, const Stages& s) {
  try {
    train::write_svg_file(path, train::render_heatmaps_svg(explain_grid(e, s)));
  } catch (const std::runtime_error&) {
    throw std::invalid_argument(fmt::format("--svg {}: cannot write", path));
  }
}

} // namespace headgrad::cli::explain
