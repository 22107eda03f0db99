#include "train/loop/train_step.hpp"

#include <chrono>
#include <cmath>
#include <algorithm>
#include <exception>
#include <limits>
#include <fmt/format.h>
#include <omp.h>
#include <string>
#include <vector>

#include "framework/distributed/communicator.hpp"
#include "framework/distributed/shard_gradients.hpp"
#include "framework/distributed/shard_tree.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/optim/optimizer.hpp"
#include "framework/engine/profiler.hpp"
#include "framework/engine/runtime/clock.hpp"
#include "framework/engine/runtime/spin_pool.hpp"
#include "train/parallel/rank_shard.hpp"

namespace headgrad::train {
namespace {

using distributed::ShardRange;


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
  const double t0 = phases ? runtime::seconds_now() : 0;
  const Tensor loss = weighted_loss(model, batch, 1.0);
  const double value = loss.item();
  check_loss(value, optimizer.params(), step);
  const double t1 = phases ? runtime::seconds_now() : 0;
  optimizer.zero_grad();
  loss.backward();
  if (phases) {
    phases->forward += t1 - t0;
    phases->backward += runtime::seconds_now() - t1;
  }
  return value;
}

// The shards of one rank, spread over n workers: worker i (worker_of(i)) runs the shards
// block_of(i) one after the other on a thread of its own - every op on that one thread, so that a
// shard's gradient has the same bits whichever worker of whichever rank runs it - each shard's mean
// loss weighted by its rows' share of `all_valid` valid positions (so the weighted losses add up
// to the mean over the global batch and their gradients to its gradient); after each backward but
// a worker's last, keep(i). Returns each shard's weighted loss, indexed from node.first. Adds
// worker 0's forward time to *forward_seconds (if given): the step's phases are its timeline.
template <typename WorkerOf, typename BlockOf, typename Keep>
std::vector<double> run_shards(WorkerOf worker_of, BlockOf block_of, Keep keep, int n, const data::Batch& batch,
                               std::int64_t shards, ShardRange node, ShardDropout* dropout, double* forward_seconds) {
  const std::int64_t rows = batch.tokens.shape()[0];
  const double all_valid = static_cast<double>(std::max<std::int64_t>(batch.valid_tokens, 1));
  std::vector<double> losses(static_cast<std::size_t>(node.count()), 0.0);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  // with --profile, when each worker finished its shards, from the moment the team was called (a
  // worker that wakes late counts as slow: the step waits for the last to finish either way)
  const bool timed = n > 1 && profiler_enabled();
  std::vector<double> worker_seconds(timed ? static_cast<std::size_t>(n) : 0);
  const double called = timed ? runtime::seconds_now() : 0;
  // n threads at once, each running every op of its shards alone: the replicas' spinning pool when
  // there is one (runtime::SpinPool, kept awake between the step's phases), else OpenMP's
  runtime::run_team(n, [&](int i) {
    try {
      const ShardRange block = block_of(i);
      for (std::int64_t s = block.first; s < block.end; ++s) {
        const ShardRange r = distributed::shard_rows(rows, shards, s);
        const data::Batch part = data::slice_batch(batch, r.first, r.count());
        const double t0 = i == 0 && forward_seconds ? runtime::seconds_now() : 0;
        if (dropout) dropout->load(worker_of(i), s); // shard s's masks, whoever runs it
        const Tensor loss = weighted_loss(worker_of(i), part, static_cast<double>(part.valid_tokens) / all_valid);
        if (dropout) dropout->store(worker_of(i), s);
        losses[static_cast<std::size_t>(s - node.first)] = loss.item();
        if (i == 0 && forward_seconds) *forward_seconds += runtime::seconds_now() - t0;
        loss.backward();
        if (s + 1 < block.end) keep(i);
      }
    } catch (...) {
      errors[static_cast<std::size_t>(i)] = std::current_exception();
    }
    if (timed) worker_seconds[static_cast<std::size_t>(i)] = runtime::seconds_now() - called;
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (timed) profiler_add_workers(worker_seconds);
  return losses;
}

// The sum of the shards' losses in the shard tree (the node's, or with across_ranks every rank's:
// each rank fills its slots of an S-vector, zeros elsewhere, so the all-reduce adds each loss only
// to zeros, exactly, and every rank adds the S losses in the tree itself).
double tree_loss(const std::vector<double>& node_losses, ShardRange node, std::int64_t shards, bool across_ranks) {
  std::vector<double> losses = node_losses;
  ShardRange range = node;
  if (across_ranks) {
    losses.assign(static_cast<std::size_t>(shards), 0.0);
    std::copy(node_losses.begin(), node_losses.end(), losses.begin() + node.first);
    distributed::allreduce_sum(losses.data(), shards);
    range = {0, shards};
  }
  distributed::TreeSum<double> tree(shards);
  for (std::int64_t s = range.first; s < range.end; ++s)
    tree.push({s, s + 1}, losses[static_cast<std::size_t>(s - range.first)], [](double& l, double r) { l += r; });
  return tree.take();
}

// A step over S shards: this rank's shards of the batch (every shard in a job of one rank, the
// rank's node of the shard tree under MPI: shard_tree.hpp), spread over its workers (the model and
// its thread replicas, if any). The gradients are added in the shard tree - over the workers by
// ShardGradients, across ranks by `across_ranks` while backward runs - and so are the losses, so
// that the step has the same bits however the S shards are spread over ranks and threads. With
// `squares`, the threads that add the workers' gradients also take each sum's sum of squares
// (optim::grad_square_sum, while it is in their cache; NaN for a parameter without a gradient).
double sharded_loss_and_gradients(models::TokenModel& model, ThreadReplicas* replicas,
                                  distributed::BucketedAllreduce* across_ranks, ShardDropout* dropout,
                                  optim::Optimizer& optimizer, const data::Batch& batch, std::int64_t shards,
                                  std::int64_t step, StepPhases* phases, std::vector<double>* squares) {
  const std::int64_t rows = batch.tokens.shape()[0];
  if (shards > rows)
    throw std::invalid_argument(fmt::format("train_step: {} shards of a batch of {} rows (every shard needs a row)",
                                            shards, rows));
  auto worker_of = [&](int i) -> models::TokenModel& { return replicas ? replicas->worker(i) : model; };
  const int workers = replicas ? replicas->count() : 1;
  optimizer.zero_grad();
  if (replicas) replicas->follow_mode();
  const double t0 = phases ? runtime::seconds_now() : 0;
  double forward = 0;
  std::vector<double> losses;
  ShardRange node{0, shards};
  if (across_ranks) {
    node = across_ranks->rank_shards();
    const int n = across_ranks->max_active();
    across_ranks->begin(n);
    losses = run_shards(worker_of, [&](int i) { return across_ranks->worker_block(i); },
                        [&](int i) { across_ranks->keep(i); }, n, batch, shards, node, dropout,
                        phases ? &forward : nullptr);
    across_ranks->finish();
  } else {
    const int n = static_cast<int>(std::min<std::int64_t>(workers, shards));
    std::vector<NamedTensors> lists;
    std::vector<ShardRange> blocks;
    for (int i = 0; i < n; ++i) {
      lists.push_back(worker_of(i).named_parameters());
      blocks.push_back(distributed::worker_shards(node, n, i));
    }
    distributed::ShardGradients sums(shards, lists);
    sums.begin(blocks);
    losses = run_shards(worker_of, [&](int i) { return blocks[static_cast<std::size_t>(i)]; },
                        [&](int i) { sums.keep(i); }, n, batch, shards, node, dropout, phases ? &forward : nullptr);
    const nn::NamedTensors& updated = optimizer.params();
    auto same = [](const auto& a, const auto& b) { return a.second.impl() == b.second.impl(); };
    const bool same_order =
        updated.size() == lists[0].size() && std::equal(updated.begin(), updated.end(), lists[0].begin(), same);
    if (!same_order) squares = nullptr; // (then clip_and_check takes the norm itself)
    if (squares) squares->assign(lists[0].size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<Tensor> total = sums.sum_all([squares](std::size_t i, const Tensor& g) {
      if (squares && g.defined()) (*squares)[i] = optim::grad_square_sum(g);
    });
    sums.end(); // the replicas' gradients go; the model's are the sums
    for (std::size_t i = 0; i < total.size(); ++i) lists[0][i].second.impl()->grad = total[i].impl_ptr();
  }
  const double value = tree_loss(losses, node, shards, across_ranks != nullptr);
  if (phases) {
    phases->forward += forward;
    phases->backward += runtime::seconds_now() - t0 - forward; // with the other workers' and shards' ends, and the sums
  }
  check_loss(value, optimizer.params(), step);
  return value;
}

} // namespace

double clip_and_check(const nn::NamedTensors& params, double clip, std::int64_t step,
                      const std::vector<double>* squares) {
  double norm = 0;
  if (clip > 0 && squares && squares->size() == params.size()) { // the gradients' sums of squares, taken already
    std::vector<double> defined;
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].second.grad().defined()) defined.push_back((*squares)[i]);
    norm = optim::norm_of_square_sums(defined); // grad_norm's value, to the bit
  } else if (clip > 0) {
    std::vector<Tensor> list;
    list.reserve(params.size());
    for (const auto& [name, p] : params) list.push_back(p);
    norm = optim::grad_norm(list); // before clipping: a NaN norm would make every gradient NaN
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

StepResult train_step(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                      const StepSettings& s, StepPhases* phases, ThreadReplicas* replicas,
                      distributed::BucketedAllreduce* across_ranks, ShardDropout* dropout) {
  const nn::NamedTensors& params = optimizer.params();
  optimizer.set_lr(s.lr);
  runtime::UsePool use(replicas ? &replicas->pool() : nullptr); // shards, sums and update on its threads
  StepResult r;
  // (the loss and the logits are gone before the update: their memory is free for it)
  const std::int64_t rows = batch.tokens.shape()[0];
  std::int64_t shards = s.shards; // 0: one per worker, the worker count limited by the rows
  if (across_ranks && shards != 0 && shards != across_ranks->shards())
    throw std::logic_error(fmt::format("train_step: {} shards, but the all-reduce was made for {}", shards,
                                       across_ranks->shards()));
  if (across_ranks) shards = across_ranks->shards();
  if (shards == 0) shards = std::min<std::int64_t>(replicas ? replicas->count() : 1, rows);
  std::vector<double> squares; // each gradient's sum of squares, for the norm, when the shard sums take them
  if (s.shards == 0 && shards == 1 && !across_ranks && !dropout)
    r.loss = loss_and_gradients(model, optimizer, batch, s.step, phases); // every op on every thread
  else
    r.loss = sharded_loss_and_gradients(model, replicas, across_ranks, dropout, optimizer, batch, shards, s.step,
                                        phases, s.clip > 0 && !across_ranks ? &squares : nullptr);
  const double t2 = phases ? runtime::seconds_now() : 0;
  r.grad_norm = clip_and_check(params, s.clip, s.step, squares.empty() ? nullptr : &squares);
  const double t3 = phases ? runtime::seconds_now() : 0;
  if (s.clip > 0) optimizer.step_scaled(optim::clip_coefficient(s.clip, r.grad_norm)); // the clipped gradients
  else optimizer.step();
  if (phases) {
    phases->clip += t3 - t2;
    phases->optimizer += runtime::seconds_now() - t3;
  }
  return r;
}

} // namespace headgrad::train
