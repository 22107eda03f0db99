#include "train/explain/explain_svg.hpp"

#include <fmt/format.h>
#include <stdexcept>

#include "framework/ops/compare.hpp"

namespace headgrad::cli::explain {
namespace {

using train::Heatmap;
using train::HeatmapScale;

// Batch row 0 of a (B, T, cols) tensor, or head hh of batch row 0 of a (B*H, T, cols) one.
Tensor first_row(const Tensor& t) { return t.slice(0, 0, 1).reshape({t.shape()[1], t.shape()[2]}); }
Tensor head_of(const Tensor& t, std::int64_t hh) { return t.slice(0, hh, hh + 1).reshape({t.shape()[1], t.shape()[2]}); }

// The (Tq, Tk) entries batch row 0's mask removes: true where a query does not keep a key.
Tensor masked_of(const Example& e) { return ops::logical_not(first_row(e.keep)).contiguous(); }

// A forward row and, once backward has run, the row of its gradients under it (panel by panel).
void projection_rows(const Stages& s, train::HeatmapGrid& grid) {
  grid.rows.push_back({"projections",
                       {{"Q (Tq x num_hiddens)", first_row(s.Q)},
                        {"K (Tk x num_hiddens)", first_row(s.K)},
                        {"V (Tk x num_hiddens)", first_row(s.V)}}});
  if (!s.Q_in.grad().defined()) return;
  grid.rows.push_back({"their gradients",
                       {{"dQ (Tq x num_hiddens)\nheads' dQh side by side", first_row(s.Q_in.grad())},
                        {"dK (Tk x num_hiddens)\nheads' dKh side by side", first_row(s.K_in.grad())},
                        {"dV (Tk x num_hiddens)\nheads' dVh side by side", first_row(s.V_in.grad())}}});
}

// rows of transpose_qkv's output for batch row 0 are 0*H + hh
void head_rows(const Example& e, const Stages& s, std::int64_t hh, train::HeatmapGrid& grid) {
  const std::string name = fmt::format("head {} (cols {}..{})", hh, hh * e.d, hh * e.d + e.d - 1);
  const Tensor masked = masked_of(e);
  const bool dropout = s.dropped.defined();
  train::HeatmapRow row{name,
                        {{"Qh (Tq x d)", head_of(s.Qh, hh)},
                         {"Kh (Tk x d)", head_of(s.Kh, hh)},
                         {"Vh (Tk x d)", head_of(s.Vh, hh)},
                         {"S (Tq x Tk), the scores\n= s Qh Kh^T", head_of(s.scores, hh), HeatmapScale::grid, masked},
                         {"P (Tq x Tk), the weights", head_of(s.weights, hh), HeatmapScale::weights, masked}}};
  if (dropout)
    row.maps.push_back({"A = dropout(P) (Tq x Tk)\n= P * m / (1 - p)", head_of(s.dropped, hh), HeatmapScale::grid,
                        masked});
  row.maps.push_back({"O (Tq x d), the head's output", head_of(s.heads_out, hh)});
  grid.rows.push_back(std::move(row));
  if (!s.Qh_in.grad().defined()) return;
  train::HeatmapRow grads{fmt::format("head {} gradients", hh),
                          {{"dQh (Tq x d)\n= s dS Kh", head_of(s.Qh_in.grad(), hh)},
                           {"dKh (Tk x d)\n= s dS^T Qh", head_of(s.Kh_in.grad(), hh)},
                           {dropout ? "dVh (Tk x d)\n= A^T dO" : "dVh (Tk x d)\n= P^T dO", head_of(s.Vh_in.grad(), hh)},
                           {"dS (Tq x Tk)\n= P * (dP - rowsum(dP * P))", head_of(s.scores_in.grad(), hh),
                            HeatmapScale::grid, masked},
                           {dropout ? "dP (Tq x Tk)\n= dA * m / (1 - p)" : "dP (Tq x Tk)\n= dO Vh^T",
                            head_of(s.weights_in.grad(), hh)}}};
  if (dropout) grads.maps.push_back({"dA (Tq x Tk)\n= dO Vh^T", head_of(s.dropped_in.grad(), hh)});
  grads.maps.push_back({"dO (Tq x d)", head_of(s.heads_in.grad(), hh)});
  grid.rows.push_back(std::move(grads));
}

void output_rows(const Example& e, const Stages& s, train::HeatmapGrid& grid) {
  grid.rows.push_back({"output",
                       {{"C (Tq x num_hiddens)\n= transpose_output(O)", first_row(s.concat)},
                        {"Y = W_o(C) (Tq x num_hiddens)", first_row(s.output)}}});
  if (!s.concat_in.grad().defined()) return;
  grid.rows.push_back({"its gradients",
                       {{"dC (Tq x num_hiddens)\n= dY W_o", first_row(s.concat_in.grad())},
                        {e.cross_entropy ? "dY (Tq x num_hiddens)\n= (softmax(Y) - onehot) * mask / N"
                                         : "dY = R (Tq x num_hiddens)\nthe upstream gradient",
                         first_row(s.output_in.grad())}}});
}

} // namespace

train::HeatmapGrid explain_grid(const Example& e, const Stages& s, bool shared_scale) {
  train::HeatmapGrid grid;
  grid.title = fmt::format("multi-head attention, batch row 0: {} heads of d = {}, valid_lens [{}]{}{}", e.H, e.d,
                           fmt::join(e.valid_lens.slice(0, 0, 1).to_int_vector(), ", "),
                           e.causal ? " (causal)" : "",
                           s.Q_in.grad().defined() ? "; each forward row has its gradients under it" : "");
  grid.signed_values = true;
  grid.shared_scale = shared_scale;
  grid.numbers = true;
  projection_rows(s, grid);
  for (std::int64_t hh = 0; hh < e.H; ++hh) head_rows(e, s, hh, grid);
  output_rows(e, s, grid);
  return grid;
}

void write_explain_svg(const std::string& path, const Example& e, const Stages& s, bool shared_scale) {
  try {
    train::write_svg_file(path, train::render_heatmaps_svg(explain_grid(e, s, shared_scale)));
  } catch (const std::runtime_error&) {
    throw std::invalid_argument(fmt::format("--svg {}: cannot write", path));
  }
}

} // namespace headgrad::cli::explain
