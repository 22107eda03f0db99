// train_step.hpp - the textbook training step: forward, loss, backward, clip, step. The trainer
// runs it when one worker trains on the whole batch (and always in reference mode); the parallel
// step (train/parallel/parallel_step.hpp) runs the same pieces - the loss, the checks, the clip
// and the update below - over the shards of a batch on several workers.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "data/tasks.hpp"
#include "framework/optim/optimizer.hpp"
#include "models/token_model.hpp"

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
};

struct StepResult {
  double loss = 0;      // mean cross-entropy over the batch's valid positions
  double grad_norm = 0; // global gradient norm before clipping (0 when clipping is off)
};

// One step of `optimizer` (make_optimizer's, over `model`'s parameters) on the whole `batch`, on
// this thread (every op using the process's threads): the masked mean cross-entropy, zero_grad,
// backward, clipping to the global norm settings.clip (torch.nn.utils.clip_grad_norm_), the
// update at settings.lr. Throws NonFiniteError before the update:
//   "step 21: the loss is nan (first non-finite tensor: parameter 'dense.weight'); training stopped"
//   "step 21: the gradient of 'x' is not finite (parameter 'y' itself is not finite); training
//    stopped before the update"
// After it the parameters' gradients are the clipped ones.
StepResult train_step(models::TokenModel& model, optim::Optimizer& optimizer, const data::Batch& batch,
                      const StepSettings& settings);

// The rest of the step after the forward, for any model (train/fit/trainer.hpp trains a user's
// model with it): `loss` is the graph's scalar root; checks it, zero_grad, backward, checks and
// clips the gradients, the update - train_step above without its forward. The same bits.
StepResult train_step(optim::Optimizer& optimizer, const Tensor& loss, const StepSettings& settings);

// The pieces of the step, shared with the parallel step.

// The masked mean cross-entropy of `model` on `batch` (the graph's root).
Tensor batch_loss(models::TokenModel& model, const data::Batch& batch);

// Throws NonFiniteError for a loss that is not finite, naming the parameter likely behind it.
void check_loss(double loss, const nn::NamedTensors& params, std::int64_t step);

// Checks the gradients of `params` and, with clip > 0, returns their global norm (optim::grad_norm;
// 0 without clipping). A non-finite gradient throws NonFiniteError naming the first parameter
// whose gradient is not finite - looked for before clipping, which would make every gradient NaN -
// and a parameter that is itself not finite. `squares`: each parameter's gradient's sum of
// squares (optim::grad_square_sum, in params' order), when the caller has them already.
double check_gradients(const nn::NamedTensors& params, double clip, std::int64_t step,
                       const std::vector<double>* squares = nullptr);

// Clipping: with clip > 0, every gradient of `params` times min(1, clip / (norm + 1e-6)), in place
// (optim::scale_to_max_norm: torch.nn.utils.clip_grad_norm_'s factor); nothing without clipping.
void clip_gradients(const nn::NamedTensors& params, double clip, double norm);

} // namespace headgrad::train
