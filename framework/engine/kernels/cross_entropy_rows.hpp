// cross_entropy_rows.hpp - log-softmax and negative log-likelihood fused over the rows of
// (rows, V) logits, each row with a weight: the loss of a classifier over positions.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "framework/engine/kernels/isa_namespace.hpp"
#include "framework/engine/kernels/vec_math.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// probs[r] = softmax(x[r]) for every row (kept for the backward). For the rows with weight[r] != 0
// (the counted rows), the row loss is weight[r] (log s - (x[r][target[r]] - m)), m the row max and
// s = sum_j exp(x[r][j] - m) - PyTorch's -log_softmax, in its order (m + log s would round log s
// to the spacing of m: 2.7e-4 relative at logits of 3000 in float32): written to row_loss[r] when
// row_loss is not null (uncounted rows get 0), and summed, in double (thousands of positions are
// summed), into the return value. A NaN or +inf in a row makes its probabilities and loss NaN, as
// in PyTorch. V = 0 has no softmax to compute and no row can be counted (no target is valid).
template <typename T>
double cross_entropy_forward(T* probs, T* row_loss, const T* x, const std::int64_t* target, const double* weight,
                             std::int64_t rows, std::int64_t V) {
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * V;
    T* pr = probs + r * V;
    if (row_loss) row_loss[r] = T(0);
    if (V == 0) continue;
    const T mx = max_lanes(xr, V);
    T s = 0;
    for (std::int64_t j = 0; j < V; ++j) s += (pr[j] = std::exp(xr[j] - mx));
    const T inv = T(1) / s;
    for (std::int64_t j = 0; j < V; ++j) pr[j] *= inv;
    if (weight[r] == 0) continue;
    const T loss = static_cast<T>(weight[r]) * (std::log(s) - (xr[target[r]] - mx));
    if (row_loss) row_loss[r] = loss;
    total += static_cast<double>(loss);
  }
  return total;
}

// dx[r] = or += row_scale[r] (probs[r] - onehot(target[r])) (first_write: =). row_scale[r] is
// dL/dloss_r times the row's weight; a row with row_scale exactly 0 (not counted) gets 0 and its
// target is not read.
template <typename T>
void cross_entropy_backward(T* dx, bool first_write, const T* probs, const std::int64_t* target, const T* row_scale,
                            std::int64_t rows, std::int64_t V) {
  if (first_write) std::fill(dx, dx + rows * V, T(0));
  for (std::int64_t r = 0; r < rows; ++r) {
    const T scale = row_scale[r];
    if (scale == T(0)) continue;
    for (std::int64_t j = 0; j < V; ++j) dx[r * V + j] += scale * probs[r * V + j];
    dx[r * V + target[r]] -= scale;
  }
}

HEADGRAD_ISA_END

} // namespace headgrad::engine
