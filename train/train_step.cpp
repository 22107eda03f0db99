#include "train/train_step.hpp"

#include <chrono>
#include <cmath>
#include <algorithm>
#include <exception>
#include <fmt/format.h>
#include <omp.h>
#include <string>
#include <vector>

#include "framework/distributed/communicator.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "train/rank_shard.hpp"

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

// Throws NonFiniteError for a loss that is not finite, naming the parameter likely behind it.
void check_loss(double value, const nn::NamedTensors& params, std::int64_t step) {
  if (std::isfinite(value)) return;
  const std::string bad = first_nonfinite_param(params);
  throw NonFiniteError(fmt::format("step {}: the loss is {} (first non-finite tensor: {}); training stopped", step,
                                   value, bad.empty() ? "the loss itself" : "parameter '" + bad + "'"));
}

// The masked mean cross-entropy of `model` on `batch`, times `weight`: the graph's root.
Tensor weighted_loss(models::TokenModel& model, const data::Batch& batch, double weight) {
  Tensor logits = model.forward(batch.tokens, batch.valid_lens); // (B, T, V)
  Tensor loss = ops::cross_entropy(logits, batch.targets, ops::sequence_mask(batch.valid_lens, batch.tokens.shape()[1]));
  return weight == 1.0 ? loss : loss * weight;
}

// Forward and backward over the whole batch on this thread; returns the loss.
double loss_and_gradients(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                          std::int64_t step, StepPhases* phases) {
  const double t0 = phases ? now() : 0;
  const Tensor loss = weighted_loss(model, batch, 1.0);
  const double value = loss.item();
  check_loss(value, optimizer.params(), step);
  const double t1 = phases ? now() : 0;
  optimizer.zero_grad();
  loss.backward();
  if (phases) {
    phases->forward += t1 - t0;
    phases->backward += now() - t1;
  }
  return value;
}

// Rows [first, first + count) of `batch` split over n workers, worker i (worker_of(i)) on a thread
// of its own taking rows [first + count i / n, first + count (i + 1) / n): forward and backward,
// its mean loss weighted by its rows' share of `all_valid` valid positions, so that the weighted
// losses add up to the mean over those positions and their gradients to its gradient. Returns the
// sum of the weighted losses. Sets *forward_done (if given) when worker 0's forward ends: the step's
// phases are worker 0's timeline.
template <typename WorkerOf>
double weighted_losses_and_gradients(WorkerOf worker_of, const data::Batch& batch, std::int64_t first,
                                     std::int64_t count, int n, std::int64_t all_valid, double* forward_done) {
  std::vector<double> losses(static_cast<std::size_t>(n), 0.0);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
#pragma omp parallel num_threads(n)
  {
    const int i = omp_get_thread_num();
    try {
      const data::Batch rows = data::slice_batch(batch, first + count * i / n, count * (i + 1) / n - count * i / n);
      const double share = static_cast<double>(rows.valid_tokens) / static_cast<double>(std::max<std::int64_t>(all_valid, 1));
      const Tensor loss = weighted_loss(worker_of(i), rows, share);
      losses[static_cast<std::size_t>(i)] = loss.item();
      if (i == 0 && forward_done) *forward_done = now();
      loss.backward();
    } catch (...) {
      errors[static_cast<std::size_t>(i)] = std::current_exception();
    }
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  double value = 0;
  for (double l : losses) value += l;
  return value;
}

// The same with the batch's rows split over the workers, one thread each, and their gradients
// added to the model's.
double loss_and_gradients(ThreadReplicas& workers, optim::Optimizer& optimizer, const data::Batch& batch,
                          std::int64_t step, StepPhases* phases) {
  const std::int64_t B = batch.tokens.shape()[0];
  const int n = static_cast<int>(std::min<std::int64_t>(workers.count(), B));
  optimizer.zero_grad();
  workers.follow_mode();
  const double t0 = phases ? now() : 0;
  double forward_done = t0;
  const double value = weighted_losses_and_gradients([&](int i) -> models::TokenModel& { return workers.worker(i); },
                                                     batch, 0, B, n, batch.valid_tokens, phases ? &forward_done : nullptr);
  workers.add_gradients_to_model();
  if (phases) {
    phases->forward += forward_done - t0;
    phases->backward += now() - forward_done; // up to the last worker's end and the gradient sum
  }
  check_loss(value, optimizer.params(), step);
  return value;
}

// One rank of several: its shard of the batch, split over its workers (the model and its thread
// replicas, if any), each worker's loss weighted by its share of the whole batch's valid positions
// (known to every rank: each one has the whole batch), while `across_ranks` sums the gradients
// over the workers and the ranks as backward makes them final. The loss is summed over the ranks
// too before it is checked, so every rank takes the same decisions.
double loss_and_gradients(distributed::BucketedAllreduce& across_ranks, models::TokenModel& model,
                          ThreadReplicas* replicas, optim::Optimizer& optimizer, const data::Batch& batch,
                          std::int64_t step, StepPhases* phases) {
  const Shard shard = shard_of(batch.tokens.shape()[0], distributed::rank(), distributed::size());
  const int n = static_cast<int>(std::min<std::int64_t>(replicas ? replicas->count() : 1, shard.count));
  optimizer.zero_grad();
  if (replicas) replicas->follow_mode();
  const double t0 = phases ? now() : 0;
  double forward_done = t0;
  across_ranks.begin(n);
  double value = 0;
  if (n > 0)
    value = weighted_losses_and_gradients(
        [&](int i) -> models::TokenModel& { return replicas ? replicas->worker(i) : model; }, batch, shard.first,
        shard.count, n, batch.valid_tokens, phases ? &forward_done : nullptr);
  across_ranks.finish();
  distributed::allreduce_sum(&value, 1);
  if (phases) {
    phases->forward += forward_done - t0;
    phases->backward += now() - forward_done; // with the gradient sums over the ranks
  }
  check_loss(value, optimizer.params(), step);
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

StepResult train_step(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                      const StepSettings& s, StepPhases* phases, ThreadReplicas* replicas,
                      distributed::BucketedAllreduce* across_ranks) {
  const nn::NamedTensors& params = optimizer.params();
  optimizer.set_lr(s.lr);
  StepResult r;
  // (the loss and the logits are gone before the update: their memory is free for it)
  if (across_ranks)
    r.loss = loss_and_gradients(*across_ranks, model, replicas, optimizer, batch, s.step, phases);
  else if (replicas && replicas->count() > 1)
    r.loss = loss_and_gradients(*replicas, optimizer, batch, s.step, phases);
  else
    r.loss = loss_and_gradients(model, optimizer, batch, s.step, phases);
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
