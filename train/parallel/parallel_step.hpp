// parallel_step.hpp - the training step over the shards of a batch on several workers: the
// textbook step (train/loop/train_step.hpp) with its forward, loss and backward run once per shard
// - on the model's thread replicas, on the ranks of an MPI job - and the shards' gradients and
// losses added in the shard tree (framework/distributed/shard_tree.hpp) before the textbook's
// clip and update. Data parallelism as PyTorch DDP does it (Li et al., "PyTorch Distributed",
// VLDB 2020), with sums whose bits depend on the shard count alone.
#pragma once
#include <cstdint>
#include <functional>

#include "framework/distributed/bucketed_allreduce.hpp"
#include "train/loop/train_step.hpp"
#include "train/parallel/dropout_state.hpp"
#include "train/parallel/thread_replicas.hpp"

namespace headgrad::train {

// Who runs the shards of a step, and how many there are.
struct StepWorkers {
  // S, the shards the batch is cut into (distributed::shard_rows: rows B s / S .. B (s + 1) / S);
  // 0: one per worker (of every rank), at most one per row. S must not exceed the rows.
  std::int64_t shards = 0;
  ThreadReplicas* replicas = nullptr; // the model's thread replicas (null: the model is the one worker)
  // One rank of an MPI job (made by gradient_allreduce_for, train/parallel/rank_shard.hpp): every
  // rank has the whole batch and trains its node of the shard tree; null in a job of one rank.
  distributed::BucketedAllreduce* across_ranks = nullptr;
  // This rank's shards' dropout generators (train/parallel/dropout_state.hpp): shard s draws its
  // masks from shard s's whichever worker runs it; null: each worker from its own (the masks then
  // depend on how the shards are spread).
  ShardDropout* dropout = nullptr;
};

// Seconds spent in each part of the step, added to by every step given one (the profile).
struct StepPhases {
  double forward = 0, backward = 0, clip = 0, optimizer = 0;
};

// The textbook step's result over S = workers.shards shards, spread over the workers - the model
// and its replicas, at most one per shard - each on a thread of its own running its contiguous
// block of shards one after the other, every op on that one thread. Each shard's loss is weighted
// by its share of the batch's valid positions, so the gradients add up to the whole batch's. With
// across_ranks the gradients are summed over the workers and ranks in the same tree while
// backward runs, so every rank updates with the whole batch's gradient and reports the whole
// batch's loss - with the same bits however the shards are spread over ranks and threads.
// std::invalid_argument if S exceeds the rows; NonFiniteError as train_step (on every rank alike).
StepResult parallel_step(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                         const StepSettings& settings, const StepWorkers& workers, StepPhases* phases = nullptr);

// The same step for any model: `shard_loss(worker, first, count)` is the loss of rows
// [first, first + count) of the batch's `rows` on worker `worker` (the model, or thread replica
// `worker` of workers.replicas), already weighted by the shard's share of the batch (so that the
// shards' losses add up to the batch's loss, and their gradients to its gradient). parallel_step
// is this with the token models' masked cross-entropy weighted by valid positions; the Trainer
// (train/fit/trainer.hpp) calls it with a user's loss.
using ShardLoss = std::function<Tensor(int worker, std::int64_t first, std::int64_t count)>;
StepResult sharded_step(nn::Module& model, optim::Optimizer& optimizer, std::int64_t rows, const ShardLoss& shard_loss,
                        const StepSettings& settings, const StepWorkers& workers, StepPhases* phases = nullptr);

} // namespace headgrad::train
