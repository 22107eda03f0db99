#include "train/loop/train_step.hpp"

#include <cmath>
#include <fmt/format.h>
#include <string>

#include "framework/ops/nn_ops.hpp"

namespace headgrad::train {

// The step as a textbook writes it. Each line is a call into the book (model, ops, autograd,
// optim); the two checks stop the run before a NaN or an infinity reaches the parameters.
StepResult train_step(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                      const StepSettings& settings) {
  // forward: the logits of every position, and from them the loss
  return train_step(optimizer, batch_loss(model, batch), settings);
}

StepResult train_step(optim::Optimizer& optimizer, const Tensor& loss, const StepSettings& settings) {
  const nn::NamedTensors& params = optimizer.params();
  const double value = loss.item();
  check_loss(value, params, settings.step);
  // backward: last step's gradients go, then d loss / d parameter for every parameter
  optimizer.zero_grad();
  loss.backward();
  // clip: the norm of all gradients together; past settings.clip they are all scaled down alike
  const double norm = check_gradients(params, settings.clip, settings.step);
  clip_gradients(params, settings.clip, norm);
  // step: the optimizer's update with this step's learning rate
  optimizer.set_lr(settings.lr);
  optimizer.step();
  return {value, norm};
}

namespace {

bool has_nonfinite(const Tensor& t) {
  bool bad = false;
  dispatch_float(t.dtype(), "check", [&]<typename T>() {
    const T* d = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n && !bad; ++i) bad = !std::isfinite(d[i]);
  });
  return bad;
}

// The first parameter whose gradient holds a NaN or Inf, in registration order ("" if none).
std::string first_nonfinite_grad(const nn::NamedTensors& params) {
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (g.defined() && has_nonfinite(g)) return name;
  }
  return "";
}

// The first parameter whose values hold a NaN or Inf ("" if none): what a non-finite loss is
// usually caused by.
std::string first_nonfinite_param(const nn::NamedTensors& params) {
  for (const auto& [name, p] : params)
    if (has_nonfinite(p)) return name;
  return "";
}

std::vector<Tensor> tensors_of(const nn::NamedTensors& params) {
  std::vector<Tensor> list;
  list.reserve(params.size());
  for (const auto& [name, p] : params) list.push_back(p);
  return list;
}

} // namespace

Tensor batch_loss(models::TokenModel& model, const data::Batch& batch) {
  const Tensor logits = model.forward(batch.tokens, batch.valid_lens); // (B, T, V)
  // the mean over the positions t < valid_lens[b] (the padding's targets are not counted)
  return ops::cross_entropy(logits, batch.targets, ops::sequence_mask(batch.valid_lens, batch.tokens.shape()[1]));
}

void check_loss(double value, const nn::NamedTensors& params, std::int64_t step) {
  if (std::isfinite(value)) return;
  const std::string bad = first_nonfinite_param(params);
  throw NonFiniteError(fmt::format("step {}: the loss is {} (first non-finite tensor: {}); training stopped", step,
                                   value, bad.empty() ? "the loss itself" : "parameter '" + bad + "'"));
}

double check_gradients(const nn::NamedTensors& params, double clip, std::int64_t step,
                       const std::vector<double>* squares) {
  double norm = 0;
  if (clip > 0 && squares && squares->size() == params.size()) { // the gradients' sums of squares, taken already
    std::vector<double> defined;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].second.grad().defined()) defined.push_back((*squares)[i]);
    norm = optim::norm_of_square_sums(defined); // grad_norm's value, to the bit
  } else if (clip > 0) {
    norm = optim::grad_norm(tensors_of(params)); // before clipping: a NaN norm would make every gradient NaN
  }
  // With clipping the norm is NaN/Inf exactly when a gradient is; without it, look.
  if (!std::isfinite(norm) || (clip <= 0 && !first_nonfinite_grad(params).empty())) {
    // A NaN/Inf parameter can hide in the forward (e.g. behind a ReLU) and show up only in
    // other tensors' gradients: name it too.
    const std::string bad = first_nonfinite_param(params);
    throw NonFiniteError(
        fmt::format("step {}: the gradient of '{}' is not finite{}; training stopped before the update", step,
                    first_nonfinite_grad(params), bad.empty() ? "" : " (parameter '" + bad + "' itself is not finite)"));
  }
  return norm;
}

// Scaling in place and then stepping has the bits of the update with the clipping folded in
// (Optimizer::step_scaled(factor)): both round gradient * factor to the gradient's dtype once (a
// factor of exactly 1 leaves the gradient as it is), and step() reads that value times 1, exactly.
void clip_gradients(const nn::NamedTensors& params, double clip, double norm) {
  if (clip > 0) optim::scale_to_max_norm(tensors_of(params), clip, norm);
}

} // namespace headgrad::train
