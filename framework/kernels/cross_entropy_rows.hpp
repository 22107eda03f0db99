// cross_entropy_rows.hpp - log-softmax and negative log-likelihood fused over the rows of
// (rows, V) logits, with a per-row mask: the loss of a classifier over positions.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace headgrad::kernels {

// probs[r] = softmax(x[r]) for every row (kept for the backward); returns the sum over the
// counted rows (counted[r] != 0) of logsumexp(x[r]) - x[r][target[r]], accumulated in double
// (thousands of positions are summed).
template <typename T>
double cross_entropy_forward(T* probs, const T* x, const std::int64_t* target, const std::int64_t* counted,
                             std::int64_t rows, std::int64_t V) {
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * V;
    T* pr = probs + r * V;
    T mx = xr[0];
    for (std::int64_t j = 1; j < V; ++j) mx = std::max(mx, xr[j]);
    T s = 0;
    for (std::int64_t j = 0; j < V; ++j) s += (pr[j] = std::exp(xr[j] - mx));
    const T inv = T(1) / s;
    for (std::int64_t j = 0; j < V; ++j) pr[j] *= inv;
    if (counted[r]) total += static_cast<double>(mx + std::log(s) - xr[target[r]]);
  }
  return total;
}

// dx[r] = or += scale (probs[r] - onehot(target[r])) for counted rows; uncounted rows get 0
// (first_write: =). scale = dL / N, N the number of counted rows.
template <typename T>
void cross_entropy_backward(T* dx, bool first_write, const T* probs, const std::int64_t* target,
                            const std::int64_t* counted, std::int64_t rows, std::int64_t V, T scale) {
  if (first_write) std::fill(dx, dx + rows * V, T(0));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!counted[r]) continue;
    for (std::int64_t j = 0; j < V; ++j) dx[r * V + j] += scale * probs[r * V + j];
    dx[r * V + target[r]] -= scale;
  }
}

} // namespace headgrad::kernels
