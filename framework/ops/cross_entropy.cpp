// cross_entropy.cpp - fused log-softmax + NLL with a mask; mean over counted positions only.
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/cross_entropy_rows.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/profiler.hpp"

namespace headgrad::ops {

Tensor sequence_mask(const Tensor& valid_lens, std::int64_t max_len) {
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

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& mask) {
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
  std::vector<std::int64_t> m = mask.defined() ? mask.to_int_vector() : std::vector<std::int64_t>(t.size(), 1);
  std::int64_t count = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!m[static_cast<std::size_t>(r)]) continue;
    ++count;
    const std::int64_t tr = t[static_cast<std::size_t>(r)];
    if (tr < 0 || tr >= V)
      throw std::invalid_argument(fmt::format("cross_entropy: target {} at position {} is outside [0, {}) (logits {})",
                                              tr, r, V, logits.shape()));
  }
  Tensor out = new_tensor({}, logits.dtype());
  Tensor probs = new_tensor({rows, V}, logits.dtype()); // softmax, saved for the backward
  dispatch_float(logits.dtype(), "cross_entropy", [&]<typename T>() {
    const double total = kernels::cross_entropy_forward<T>(probs.data<T>(), xc.data<T>(), t.data(), m.data(), rows, V);
    out.data<T>()[0] = count ? static_cast<T>(total / static_cast<double>(count)) : T(0);
  });
  // forward: L = (1/N) sum_{r counted} (logsumexp(x_r) - x_r[t_r]),   N = number counted
  // local:   dL/dx_r[j] = (softmax(x_r)_j - [j == t_r]) / N  for counted r, 0 otherwise
  // VJP:     dx_r[j] += dL (p_r[j] - [j == t_r]) / N
  // shapes:  logits, dlogits: (..., V) as (rows, V); targets, mask: (...); L, dL: ()
  return record(out, "cross_entropy", {xc},
                [probs, t = std::move(t), m = std::move(m), rows, V, count](Node& n, const Tensor& dL) {
                  if (count == 0) return;
                  const GradBuffer dx = n.grad_buffer(0);
                  dispatch_float(dL.dtype(), "cross_entropy", [&]<typename T>() {
                    const T scale = dL.data<T>()[0] / static_cast<T>(count);
                    kernels::cross_entropy_backward<T>(dx.data<T>(), dx.first_write, probs.data<T>(), t.data(),
                                                       m.data(), rows, V, scale);
                  });
                });
}

} // namespace headgrad::ops
