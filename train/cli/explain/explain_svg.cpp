#include "train/cli/explain/explain_svg.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::cli::explain {
namespace {

using train::Heatmap;
using train::HeatmapScale;

// Batch row 0 of a (B, T, cols) tensor, or head hh of batch row 0 of a (B*H, T, cols) one.
Tensor first_row(const Tensor& t) { return t.slice(0, 0, 1).reshape({t.shape()[1], t.shape()[2]}); }
Tensor head_of(const Tensor& t, std::int64_t hh) { return t.slice(0, hh, hh + 1).reshape({t.shape()[1], t.shape()[2]}); }

// A forward row and, once backward has run, the row of its gradients under it (panel by panel).
void projection_rows(const Stages& s, train::HeatmapGrid& grid) {
  grid.rows.push_back({"projections",
                       {{"Q (Tq x num_hiddens)", first_row(s.Q)},
                        {"K (Tk x num_hiddens)", first_row(s.K)},
                        {"V (Tk x num_hiddens)", first_row(s.V)}}});
  if (!s.Q_in.grad().defined()) return;
  grid.rows.push_back({"their gradients",
                       {{"dQ (Tq x num_hiddens)\nheads' dQ side by side", first_row(s.Q_in.grad())},
                        {"dK (Tk x num_hiddens)\nheads' dK side by side", first_row(s.K_in.grad())},
                        {"dV (Tk x num_hiddens)\nheads' dV side by side", first_row(s.V_in.grad())}}});
}

// rows of transpose_qkv's output for batch row 0 are 0*H + hh
void head_rows(const Example& e, const Stages& s, std::int64_t hh, train::HeatmapGrid& grid) {
  const std::string name = fmt::format("head {} (cols {}..{})", hh, hh * e.d, hh * e.d + e.d - 1);
  grid.rows.push_back({name,
                       {{"Q head (Tq x d)", head_of(s.Qh, hh)},
                        {"K head (Tk x d)", head_of(s.Kh, hh)},
                        {"V head (Tk x d)", head_of(s.Vh, hh)},
                        {"scores (Tq x Tk)\n= Q K^T / sqrt(d)", head_of(s.scores, hh)},
                        {"weights (Tq x Tk)", head_of(s.weights, hh), HeatmapScale::weights},
                        {"head output (Tq x d)", head_of(s.heads_out, hh)}}});
  if (!s.Qh_in.grad().defined()) return;
  grid.rows.push_back({fmt::format("head {} gradients", hh),
                       {{"dQ head (Tq x d)\n= d scores K / sqrt(d)", head_of(s.Qh_in.grad(), hh)},
                        {"dK head (Tk x d)\n= d scores^T Q / sqrt(d)", head_of(s.Kh_in.grad(), hh)},
                        {"dV head (Tk x d)\n= weights^T d out", head_of(s.Vh_in.grad(), hh)},
                        {"d scores (Tq x Tk)\n= w * (dw - rowsum(dw * w))", head_of(s.scores_in.grad(), hh)},
                        {"d weights (Tq x Tk)\n= d out V^T", head_of(s.weights_in.grad(), hh)},
                        {"d head output (Tq x d)", head_of(s.heads_in.grad(), hh)}}});
}

void output_rows(const Example& e, const Stages& s, train::HeatmapGrid& grid) {
  grid.rows.push_back({"output",
                       {{"concat (Tq x num_hiddens)", first_row(s.concat)},
                        {"W_o(concat) (Tq x num_hiddens)", first_row(s.output)}}});
  if (!s.concat_in.grad().defined()) return;
  grid.rows.push_back({"its gradients",
                       {{"d concat (Tq x num_hiddens)\n= R W_o", first_row(s.concat_in.grad())},
                        {"d output = R (Tq x num_hiddens)\nthe upstream gradient", first_row(e.R)}}});
}

} // namespace

train::HeatmapGrid explain_grid(const Example& e, const Stages& s) {
  train::HeatmapGrid grid;
  grid.title = fmt::format("multi-head attention, batch row 0: {} heads of d = {}, valid_lens [{}]{}", e.H, e.d,
                           fmt::join(e.valid_lens.to_int_vector(), ", "),
                           s.Q_in.grad().defined() ? "; each forward row has its gradients under it" : "");
  grid.signed_values = true;
  projection_rows(s, grid);
  for (std::int64_t hh = 0; hh < e.H; ++hh) head_rows(e, s, hh, grid);
  output_rows(e, s, grid);
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
