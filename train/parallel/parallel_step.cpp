#include "train/parallel/parallel_step.hpp"

#include <algorithm>
#include <exception>
#include <fmt/format.h>
#include <limits>
#include <vector>

#include "framework/distributed/communicator.hpp"
#include "framework/distributed/shard_gradients.hpp"
#include "framework/distributed/shard_tree.hpp"
#include "framework/engine/profiler.hpp"
#include "framework/engine/runtime/clock.hpp"
#include "framework/engine/runtime/spin_pool.hpp"

namespace headgrad::train {
namespace {

using distributed::ShardRange;

// The shards of one rank, spread over n workers: worker i (worker_of(i)) runs the shards
// block_of(i) one after the other on a thread of its own - every op on that one thread, so that a
// shard's gradient has the same bits whichever worker of whichever rank runs it - each shard's loss
// shard_loss(i, first, count) of the `rows` rows, weighted by its share of the batch (so the
// weighted losses add up to the batch's and their gradients to its gradient); after each backward but
// a worker's last, keep(i). Returns each shard's weighted loss, indexed from node.first. Adds
// worker 0's forward time to *forward_seconds (if given): the step's phases are its timeline.
template <typename WorkerOf, typename BlockOf, typename Keep>
std::vector<double> run_shards(WorkerOf worker_of, BlockOf block_of, Keep keep, int n, const ShardLoss& shard_loss,
                               std::int64_t rows, std::int64_t shards, ShardRange node, ShardDropout* dropout,
                               double* forward_seconds) {
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
        const double t0 = i == 0 && forward_seconds ? runtime::seconds_now() : 0;
        if (dropout) dropout->load(worker_of(i), s); // shard s's masks, whoever runs it
        // the loss on the shard's rows, times the shard's share of the batch
        const Tensor loss = shard_loss(i, r.first, r.count());
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

// S as the step runs it: the workers' count for 0 (limited by the rows), the all-reduce's with
// one (which must agree with an S given).
std::int64_t shard_count(std::int64_t rows, const StepWorkers& w) {
  std::int64_t shards = w.shards;
  if (w.across_ranks && shards != 0 && shards != w.across_ranks->shards())
    throw std::logic_error(fmt::format("parallel_step: {} shards, but the all-reduce was made for {}", shards,
                                       w.across_ranks->shards()));
  if (w.across_ranks) shards = w.across_ranks->shards();
  if (shards == 0) shards = std::min<std::int64_t>(w.replicas ? w.replicas->count() : 1, rows);
  if (shards > rows)
    throw std::invalid_argument(fmt::format("parallel_step: {} shards of a batch of {} rows (every shard needs a row)",
                                            shards, rows));
  return shards;
}

// The forward and backward of a step over S shards: this rank's shards of the batch (every shard
// in a job of one rank, the rank's node of the shard tree under MPI: shard_tree.hpp), spread over
// its workers (the model and its thread replicas, if any). The gradients are added in the shard
// tree - over the workers by ShardGradients, across ranks by `across_ranks` while backward runs -
// into the model's, and so are the losses, so that the step has the same bits however the S shards
// are spread over ranks and threads. Returns the batch's loss. With `squares`, the threads that
// add the workers' gradients also take each sum's sum of squares (optim::grad_square_sum, while it
// is in their cache; NaN for a parameter without a gradient).
double sharded_loss_and_gradients(nn::Module& model, optim::Optimizer& optimizer, const ShardLoss& shard_loss,
                                  std::int64_t rows, std::int64_t shards, const StepWorkers& w, std::int64_t step, StepPhases* phases,
                                  std::vector<double>* squares) {
  auto worker_of = [&](int i) -> nn::Module& { return w.replicas ? w.replicas->module(i) : model; };
  const int workers = w.replicas ? w.replicas->count() : 1;
  optimizer.zero_grad();
  if (w.replicas) w.replicas->follow_mode();
  const double t0 = phases ? runtime::seconds_now() : 0;
  double forward = 0;
  std::vector<double> losses;
  ShardRange node{0, shards};
  if (w.across_ranks) {
    node = w.across_ranks->rank_shards();
    const int n = w.across_ranks->max_active();
    w.across_ranks->begin(n);
    losses = run_shards(worker_of, [&](int i) { return w.across_ranks->worker_block(i); },
                        [&](int i) { w.across_ranks->keep(i); }, n, shard_loss, rows, shards, node, w.dropout,
                        phases ? &forward : nullptr);
    w.across_ranks->finish();
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
                        [&](int i) { sums.keep(i); }, n, shard_loss, rows, shards, node, w.dropout,
                        phases ? &forward : nullptr);
    const nn::NamedTensors& updated = optimizer.params();
    auto same = [](const auto& a, const auto& b) { return a.second.impl() == b.second.impl(); };
    const bool same_order =
        updated.size() == lists[0].size() && std::equal(updated.begin(), updated.end(), lists[0].begin(), same);
    if (!same_order) squares = nullptr; // (then check_gradients takes the norm itself)
    if (squares) squares->assign(lists[0].size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<Tensor> total = sums.sum_all([squares](std::size_t i, const Tensor& g) {
      if (squares && g.defined()) (*squares)[i] = optim::grad_square_sum(g);
    });
    sums.end(); // the replicas' gradients go; the model's are the sums
    for (std::size_t i = 0; i < total.size(); ++i) lists[0][i].second.impl()->grad = total[i].impl_ptr();
  }
  const double value = tree_loss(losses, node, shards, w.across_ranks != nullptr);
  if (phases) {
    phases->forward += forward;
    phases->backward += runtime::seconds_now() - t0 - forward; // with the other workers' and shards' ends, and the sums
  }
  check_loss(value, optimizer.params(), step);
  return value;
}

} // namespace

StepResult parallel_step(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                         const StepSettings& s, const StepWorkers& w, StepPhases* phases) {
  auto worker_of = [&](int i) -> models::TokenModel& { return w.replicas ? w.replicas->worker(i) : model; };
  const double all_valid = static_cast<double>(std::max<std::int64_t>(batch.valid_tokens, 1));
  // the textbook's loss on the shard's rows, times the shard's share of the batch's valid positions
  const ShardLoss shard_loss = [&](int i, std::int64_t first, std::int64_t count) {
    const data::Batch part = data::slice_batch(batch, first, count);
    const double weight = static_cast<double>(part.valid_tokens) / all_valid;
    const Tensor unweighted = batch_loss(worker_of(i), part);
    return weight == 1.0 ? unweighted : unweighted * weight;
  };
  return sharded_step(model, optimizer, batch.tokens.shape()[0], shard_loss, s, w, phases);
}

StepResult sharded_step(nn::Module& model, optim::Optimizer& optimizer, std::int64_t rows, const ShardLoss& shard_loss,
                        const StepSettings& s, const StepWorkers& w, StepPhases* phases) {
  const nn::NamedTensors& params = optimizer.params();
  runtime::UsePool use(w.replicas ? &w.replicas->pool() : nullptr); // shards, sums and update on its threads
  const std::int64_t shards = shard_count(rows, w);
  std::vector<double> squares; // each gradient's sum of squares, for the norm, when the shard sums take them
  // forward, loss and backward of every shard, the gradients and losses added up
  // (the loss and the logits are gone before the update: their memory is free for it)
  const double loss = sharded_loss_and_gradients(model, optimizer, shard_loss, rows, shards, w, s.step, phases,
                                                 s.clip > 0 && !w.across_ranks ? &squares : nullptr);
  // then the textbook's clip and step
  const double t2 = phases ? runtime::seconds_now() : 0;
  const double norm = check_gradients(params, s.clip, s.step, squares.empty() ? nullptr : &squares);
  clip_gradients(params, s.clip, norm);
  const double t3 = phases ? runtime::seconds_now() : 0;
  optimizer.set_lr(s.lr);
  optimizer.step();
  if (phases) {
    phases->clip += t3 - t2;
    phases->optimizer += runtime::seconds_now() - t3;
  }
  return {loss, norm};
}

} // namespace headgrad::train
