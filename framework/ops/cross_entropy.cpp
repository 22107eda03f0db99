// cross_entropy.cpp - fused log-softmax + NLL with a per-position mask or weight and PyTorch's
// ignore_index and reduction; the mean is over the counted positions (their weights) only.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/nn_ops.hpp"

namespace headgrad::book {

// forward:  probs_r = softmax(x_r) for every row r of (rows, V) logits (kept for the backward);
//           for a counted row (weight w_r != 0), l_r = w_r (log s - (x_r[t_r] - m)) with m the
//           row's max and s = sum_j exp(x_r[j] - m) (-log_softmax, in PyTorch's order: m + log s
//           would round log s to the spacing of m). row_loss[r] = l_r (0 for a row not counted)
//           when row_loss is not null; returns sum_r l_r, in double. A NaN or +inf in a row makes
//           its probabilities and loss NaN.
template <typename T>
double cross_entropy_forward(T* probs, T* row_loss, const T* x, const std::int64_t* target, const double* weight,
                             std::int64_t rows, std::int64_t V) {
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (row_loss) row_loss[r] = T(0);
    if (V == 0) continue; // no class: nothing to normalise, no target to count
    const T* xr = x + r * V;
    const T m = *std::max_element(xr, xr + V);
    T s = 0;
    for (std::int64_t j = 0; j < V; ++j) s += std::exp(xr[j] - m);
    for (std::int64_t j = 0; j < V; ++j) probs[r * V + j] = std::exp(xr[j] - m) / s;
    if (weight[r] == 0) continue;
    const T loss = static_cast<T>(weight[r]) * (std::log(s) - (xr[target[r]] - m));
    if (row_loss) row_loss[r] = loss;
    total += static_cast<double>(loss);
  }
  return total;
}
HEADGRAD_BOOK_LOOP(cross_entropy_forward);

// VJP:      dx_r[j] = or += row_scale[r] (probs_r[j] - [j == t_r])  (first_write: =), row_scale[r]
//           = dL/dl_r times the row's weight (cross_entropy derives it); a row with row_scale 0 (not
//           counted) gets 0 and its target is not read.
template <typename T>
void cross_entropy_backward(T* dx, bool first_write, const T* probs, const std::int64_t* target, const T* row_scale,
                            std::int64_t rows, std::int64_t V) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < V; ++j) {
      const T onehot = row_scale[r] != T(0) && j == target[r] ? T(1) : T(0);
      store_grad(dx[r * V + j], row_scale[r] == T(0) ? T(0) : row_scale[r] * (probs[r * V + j] - onehot), first_write);
    }
}
HEADGRAD_BOOK_LOOP(cross_entropy_backward);

} // namespace headgrad::book

namespace headgrad::ops {

Tensor sequence_mask(const Tensor& valid_lens, std::int64_t max_len) {
  check_defined(valid_lens, "sequence_mask", "valid_lens");
  if (valid_lens.dtype() != DType::i64 || valid_lens.dim() != 1)
    throw std::invalid_argument(fmt::format("sequence_mask: valid_lens must be 1-D int64, got {} {}",
                                            valid_lens.shape(), dtype_name(valid_lens.dtype())));
  const auto v = valid_lens.to_int_vector();
  Tensor m = new_tensor({valid_lens.shape()[0], max_len}, DType::bool8);
  bool* p = m.data<bool>();
  for (std::size_t b = 0; b < v.size(); ++b)
    for (std::int64_t t = 0; t < max_len; ++t) p[static_cast<std::int64_t>(b) * max_len + t] = t < v[b];
  return m;
}

namespace {

// Per position: its weight, 0 where it carries no loss (mask 0 or the target is ignore_index).
// A float mask is the weight itself (finite and >= 0); any other mask dtype counts its nonzero
// positions with weight 1.
std::vector<double> position_weights(const Tensor& mask, const std::vector<std::int64_t>& t,
                                     std::optional<std::int64_t> ignore_index, const Dims& logits_shape) {
  std::vector<double> w = !mask.defined() ? std::vector<double>(t.size(), 1.0) : mask.to_vector();
  const bool weights = mask.defined() && is_float(mask.dtype());
  for (std::size_t r = 0; r < w.size(); ++r) {
    if (weights && !(w[r] >= 0 && std::isfinite(w[r])))
      throw std::invalid_argument(fmt::format("cross_entropy: mask weight {} at position {} is not a finite value "
                                              ">= 0 (logits {})", w[r], r, logits_shape));
    if (!weights) w[r] = w[r] != 0 ? 1.0 : 0.0;
    if (ignore_index && t[r] == *ignore_index) w[r] = 0;
  }
  return w;
}

} // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options) {
  check_defined(logits, "cross_entropy", "logits");
  check_defined(targets, "cross_entropy", "targets");
  const Tensor& mask = options.mask;
  if (logits.dim() < 1)
    throw std::invalid_argument("cross_entropy: logits need a class axis, got a scalar");
  const std::int64_t V = logits.shape().back();
  const Dims lead(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.dtype() != DType::i64 || !(targets.shape() == lead))
    throw std::invalid_argument(fmt::format("cross_entropy: targets {} {} must be int64 of shape {} for logits {}",
                                            targets.shape(), dtype_name(targets.dtype()), lead, logits.shape()));
  if (mask.defined() && !(mask.shape() == lead))
    throw std::invalid_argument(fmt::format("cross_entropy: mask {} must have shape {} for logits {}", mask.shape(),
                                            lead, logits.shape()));
  OpTimer timer("cross_entropy");
  Tensor xc = logits.contiguous();
  const std::int64_t rows = lead.numel();
  const auto t = targets.to_int_vector();
  const std::vector<double> w = position_weights(mask, t, options.ignore_index, logits.shape());
  double total_weight = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::size_t at = static_cast<std::size_t>(r);
    if (w[at] == 0) continue;
    total_weight += w[at];
    if (t[at] < 0 || t[at] >= V)
      throw std::invalid_argument(fmt::format("cross_entropy: target {} at position {} is outside [0, {}) (logits {})",
                                              t[at], r, V, logits.shape()));
  }
  const Reduction reduction = options.reduction;
  Tensor out = new_tensor(reduction == Reduction::none ? lead : Dims{}, logits.dtype());
  Tensor probs = new_tensor({rows, V}, logits.dtype()); // softmax, saved for the backward
  dispatch_float(logits.dtype(), "cross_entropy", [&]<typename T>() {
    T* row_loss = reduction == Reduction::none ? out.data<T>() : nullptr;
    const double total = kernels::cross_entropy_forward<T>(probs.data<T>(), row_loss, xc.data<T>(), t.data(), w.data(),
                                                           rows, V);
    if (reduction == Reduction::sum) out.data<T>()[0] = static_cast<T>(total);
    if (reduction == Reduction::mean) out.data<T>()[0] = total_weight > 0 ? static_cast<T>(total / total_weight) : T(0);
  });
  // forward: l_r = w_r (logsumexp(x_r) - x_r[t_r])     (w_r = 0 where nothing is counted)
  //          L = sum_r l_r / W (mean, W = sum_r w_r; 0 when W = 0), sum_r l_r (sum), or l (none)
  // local:   dl_r/dx_r[j] = w_r (softmax(x_r)_j - [j == t_r])
  // VJP:     dx_r[j] += g_r w_r (p_r[j] - [j == t_r]),  g_r = dL / W (mean), dL (sum), dl_r (none)
  // shapes:  logits, dlogits: (..., V) as (rows, V); targets, mask, l: (...); L, dL: () or (...)
  const double per_weight = reduction == Reduction::mean && total_weight > 0 ? 1.0 / total_weight : 1.0;
  return record(out, "cross_entropy", {xc},
                [probs, t = std::move(t), w = std::move(w), rows, V, per_weight, reduction](Node& n, const Tensor& dL) {
                  const GradBuffer dx = n.grad_buffer(0);
                  dispatch_float(dL.dtype(), "cross_entropy", [&]<typename T>() {
                    std::vector<T> row_scale(static_cast<std::size_t>(rows)); // g_r w_r, 0 where not counted
                    for (std::size_t r = 0; r < row_scale.size(); ++r) {
                      const T g = dL.data<T>()[reduction == Reduction::none ? r : 0];
                      row_scale[r] = w[r] == 0 ? T(0) : g * static_cast<T>(w[r] * per_weight);
                    }
                    kernels::cross_entropy_backward<T>(dx.data<T>(), dx.first_write, probs.data<T>(), t.data(),
                                                       row_scale.data(), rows, V);
                  });
                });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& mask) {
  check_defined(logits, "cross_entropy", "logits");
  check_defined(targets, "cross_entropy", "targets");
  CrossEntropyOptions options;
  options.mask = mask;
  options.ignore_index = std::nullopt; // every target at a counted position must be a class
  return cross_entropy(logits, targets, options);
}

} // namespace headgrad::ops
