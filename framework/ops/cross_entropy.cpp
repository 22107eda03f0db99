// cross_entropy.cpp - fused log-softmax + NLL with a per-position mask or weight and PyTorch's
// ignore_index and reduction; the mean is over the counted positions (their weights) only.
#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels/cross_entropy_rows.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/engine/profiler.hpp"

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
