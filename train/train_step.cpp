#include "train/train_step.hpp"

#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "framework/ops/nn_ops.hpp"

namespace headgrad::train {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

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

// Forward and the masked loss; throws if the loss is not finite.
double forward_loss(models::SequenceModel& model, const nn::NamedTensors& params, const data::Batch& batch,
                    std::int64_t step, Tensor& loss) {
  Tensor logits = model.forward(batch.tokens, batch.valid_lens); // (B, T, V)
  loss = ops::cross_entropy(logits, batch.targets, ops::sequence_mask(batch.valid_lens, batch.tokens.shape()[1]));
  const double value = loss.item();
  if (!std::isfinite(value)) {
    const std::string bad = first_nonfinite_param(params);
    throw NonFiniteError(fmt::format("step {}: the loss is {} (first non-finite tensor: {}); training stopped", step,
                                     value, bad.empty() ? "the loss itself" : "parameter '" + bad + "'"));
  }
  return value;
}

// Clips the global gradient norm (clip > 0) and checks the gradients; returns the norm.
double clip_and_check(const nn::NamedTensors& params, double clip, std::int64_t step) {
  double norm = 0;
  if (clip > 0) {
    std::vector<Tensor> list;
    list.reserve(params.size());
    for (const auto& [name, p] : params) list.push_back(p);
    norm = optim::clip_grad_norm(list, clip);
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

} // namespace

StepResult train_step(models::SequenceModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                      const StepSettings& s, StepPhases* phases) {
  const nn::NamedTensors& params = optimizer.params();
  optimizer.set_lr(s.lr);
  StepResult r;
  const double t0 = phases ? now() : 0;
  {
    Tensor loss;
    r.loss = forward_loss(model, params, batch, s.step, loss);
    const double t1 = phases ? now() : 0;
    optimizer.zero_grad();
    loss.backward();
    if (phases) {
      phases->forward += t1 - t0;
      phases->backward += now() - t1;
    }
  } // the loss and the logits go before the update: their memory is free for it
  const double t2 = phases ? now() : 0;
  r.grad_norm = clip_and_check(params, s.clip, s.step);
  const double t3 = phases ? now() : 0;
  optimizer.step();
  if (phases) {
    phases->clip += t3 - t2;
    phases->optimizer += now() - t3;
  }
  return r;
}

} // namespace headgrad::train
