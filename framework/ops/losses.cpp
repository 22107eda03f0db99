// losses.cpp - the losses a user reaches for besides cross_entropy: mean squared error, L1,
// smooth L1, binary cross-entropy on logits and the negative log-likelihood of log-probabilities,
// with PyTorch's reductions. Each is a composite: the ops it is written with record their own
// backward, and the comment above each says what their gradients add up to.
#include <fmt/format.h>

#include "framework/ops/compare.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {
namespace {

// The elementwise losses take an input and a target of one float dtype and one shape (PyTorch
// broadcasts a target of another shape, warning that it is likely a bug: refused here).
void check_pair(const char* op, const Tensor& input, const Tensor& target) {
  check_defined(input, op, "input");
  check_defined(target, op, "target");
  if (!is_float(input.dtype()) || input.dtype() != target.dtype() || !(input.shape() == target.shape()))
    throw std::invalid_argument(fmt::format("{}: input {} {} and target {} {} must be float tensors of one dtype and "
                                            "shape",
                                            op, input.shape().str(), dtype_name(input.dtype()), target.shape().str(),
                                            dtype_name(target.dtype())));
}

// The reduction of the elementwise losses l: mean (Σ l / N), sum (Σ l) or none (l).
Tensor reduce(const char* op, const Tensor& l, Reduction reduction) {
  if (reduction == Reduction::none) return l;
  if (reduction == Reduction::sum) return sum(l);
  if (l.numel() == 0) throw std::invalid_argument(fmt::format("{}: the mean over an empty input", op));
  return mean(l);
}

} // namespace

// forward:  l = (x − y)²
// gradient: dx = 2 (x − y) dl, dy = −dx (PyTorch's mse_loss_backward): d · d adds dl · d twice.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("mse_loss", input, target);
  const Tensor d = input - target;
  return reduce("mse_loss", d * d, reduction);
}

// forward:  l = |x − y|
// gradient: dx = sign(x − y) dl (0 where x = y), dy = −dx.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("l1_loss", input, target);
  return reduce("l1_loss", abs(input - target), reduction);
}

// forward:  z = |x − y|; l = z² / (2β) where z < β, else z − β/2 (Huber's loss over β; β = 0 is L1)
// gradient: dx = (x − y) / β · dl where z < β, else sign(x − y) dl; dy = −dx. where() sends dl
//           to the branch it took, so neither branch's gradient leaks into the other.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  check_pair("smooth_l1_loss", input, target);
  if (!(beta >= 0)) throw std::invalid_argument(fmt::format("smooth_l1_loss: beta = {} must be >= 0", beta));
  const Tensor d = input - target, z = abs(d);
  if (beta == 0) return reduce("smooth_l1_loss", z, reduction);
  return reduce("smooth_l1_loss", where(lt(z, beta), d * d * (0.5 / beta), z - 0.5 * beta), reduction);
}

// forward:  l = −[y log σ(x) + (1 − y) log(1 − σ(x))] = (1 − y) x + m + log(e^{−m} + e^{−x−m}),
//           m = max(−x, 0) (PyTorch's form: no exp overflows)
// gradient: dx = (σ(x) − y) dl, dy = −x dl. (The terms through m cancel: the function does not
//           depend on m; the composed ops' gradients add up to σ(x) − y to rounding.)
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("binary_cross_entropy_with_logits", input, target);
  const Tensor m = relu(-input);
  const Tensor l = (1.0 - target) * input + m + log(exp(-m) + exp(-input - m));
  return reduce("binary_cross_entropy_with_logits", l, reduction);
}

// forward:  l_r = −x_r[t_r] over log-probabilities (..., C) and int64 targets (...), 0 where
//           t_r = ignore_index; mean: Σ l_r / (the positions not ignored)
// gradient: dx_r[t_r] = −dl_r (gather's scatter-add), 0 elsewhere and on ignored rows.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, Reduction reduction, std::int64_t ignore_index) {
  check_defined(log_probs, "nll_loss", "log_probs");
  check_defined(targets, "nll_loss", "targets");
  const Dims& s = log_probs.shape();
  if (!is_float(log_probs.dtype()) || s.size() < 1 || targets.dtype() != DType::i64 ||
      !(targets.shape() == Dims(s.begin(), s.end() - 1)))
    throw std::invalid_argument(fmt::format("nll_loss: log_probs {} {} must be float (..., C) and targets {} {} int64 "
                                            "(...)",
                                            s.str(), dtype_name(log_probs.dtype()), targets.shape().str(),
                                            dtype_name(targets.dtype())));
  for (const std::int64_t t : targets.to_int_vector())
    if (t != ignore_index && (t < 0 || t >= s.back()))
      throw std::invalid_argument(fmt::format("nll_loss: target {} is not a class of {} (nor ignore_index {})", t,
                                              s.back(), ignore_index));
  const Tensor ignored = eq(targets, static_cast<double>(ignore_index));
  const Tensor picked = squeeze(gather(log_probs, -1, unsqueeze(masked_fill(targets, ignored, 0), -1)), -1);
  const Tensor l = masked_fill(-picked, ignored, 0.0);
  if (reduction != Reduction::mean) return reduce("nll_loss", l, reduction);
  return sum(l) / sum(logical_not(ignored)).to(log_probs.dtype()); // none counted: 0 / 0, NaN (as PyTorch)
}

} // namespace headgrad::ops
