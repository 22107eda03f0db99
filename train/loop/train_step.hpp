// train_step.hpp - one optimisation step of the reference model: forward, masked cross-entropy,
// zero_grad, backward, global-norm clipping, the optimizer's update. The trainer, the benchmark
// and the tests all step through this one function.
#pragma once
#include <cstdint>
#include <stdexcept>

#include "data/tasks.hpp"
#include "framework/distributed/bucketed_allreduce.hpp"
#include "framework/optim/optimizer.hpp"
#include "models/token_model.hpp"
#include "train/parallel/dropout_state.hpp"
#include "train/parallel/thread_replicas.hpp"

namespace headgrad::train {

// The loss or a gradient is not finite: names the step and the first such tensor. Thrown before
// the update, so the parameters and the optimizer state are those of the step before.
struct NonFiniteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct StepSettings {
  std::int64_t step; // 1-based, for messages
  double lr;         // this step's learning rate (the schedule's value)
  double clip;       // global gradient-norm bound (0: no clipping)
  std::int64_t shards = 0; // S, the shards the batch is cut into (0: one per worker, at most one per row)
};

struct StepResult {
  double loss = 0;      // mean cross-entropy over the batch's valid positions
  double grad_norm = 0; // global gradient norm before clipping (0 when clipping is off)
};

// Seconds spent in each part of the step, added to by every step given one (the profile).
struct StepPhases {
  double forward = 0, backward = 0, clip = 0, optimizer = 0;
};

// Checks the gradients of `params` and, with clip > 0, returns their global norm (0 without
// clipping; train_step then steps with the gradients times optim::clip_coefficient of it, the
// gradients themselves unchanged). A non-finite gradient throws NonFiniteError naming the first
// parameter whose gradient is not finite - looked for before clipping, which would make every
// gradient NaN - and a parameter that is itself not finite. `squares`: each parameter's gradient's
// sum of squares (optim::grad_square_sum, in params' order), when the caller has them already.
double clip_and_check(const nn::NamedTensors& params, double clip, std::int64_t step,
                      const std::vector<double>* squares = nullptr);

// `optimizer` updates `model`'s parameters (as make_optimizer builds it). The batch is cut into S =
// settings.shards shards (distributed::shard_rows: rows B s / S .. B (s + 1) / S). With S = 1 and
// no replicas the whole batch runs on this thread, every op using the process's threads. Else the
// shards are spread over the workers - the model and its `replicas`, at most one per shard - each
// on a thread of its own running its contiguous block of shards one after the other, every op on
// that one thread; each shard's loss is weighted by its share of the batch's valid positions (so
// the gradients add up to the whole batch's), and the shards' gradients and losses are added in
// the shard tree (framework/distributed/shard_tree.hpp) into the model's before clipping. With
// `across_ranks` (one rank of an MPI job, made by gradient_allreduce_for in train/parallel/rank_shard.hpp)
// every rank has the whole batch and trains its node of the shard tree, and the gradients are
// summed over the workers and ranks in the same tree while backward runs, so every rank updates
// with the whole batch's gradient and reports the whole batch's loss - with the same bits
// however the shards are spread over ranks and threads. S = 0: one shard per worker (of every
// rank), at most one per row; S must not exceed the rows (std::invalid_argument). Throws
// NonFiniteError (on every rank alike):
//   "step 21: the loss is nan (first non-finite tensor: parameter 'dense.weight'); training stopped"
//   "step 21: the gradient of 'x' is not finite (parameter 'y' itself is not finite); training
//    stopped before the update"
// With clipping, the update reads the gradients times the clip coefficient (Optimizer::step_scaled:
// the bits of clipping in place first); the parameters' gradients stay as the backward left them.
// With `dropout` (this rank's shards' generators, train/parallel/dropout_state.hpp), shard s draws its
// dropout masks from shard s's generators whichever worker runs it; without, each worker from its
// own (the masks then depend on how the shards are spread).
StepResult train_step(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                      const StepSettings& settings, StepPhases* phases = nullptr, ThreadReplicas* replicas = nullptr,
                      distributed::BucketedAllreduce* across_ranks = nullptr, ShardDropout* dropout = nullptr);

} // namespace headgrad::train
