// run_optimizer.hpp - the optimizer and the learning-rate schedule a run config asks for.
#pragma once
#include <memory>

#include "framework/optim/optimizer.hpp"
#include "train/run/run_config.hpp"

namespace headgrad::train {

// Adam / AdamW (beta1 and eps: optim::AdamOptions' defaults, PyTorch's; beta2 the run's) or SGD over
// `params`; throws std::invalid_argument for an unknown cfg.optimizer. With cfg.decay "matrices"
// the weight decay applies to the parameters of two or more dimensions only (Linear and Embedding
// weights), as nanoGPT's configure_optimizers groups them; biases and norm gains are not decayed.
std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& cfg, const nn::NamedTensors& params);

// Linear warmup over cfg.warmup steps to cfg.lr, then constant, or cosine decay to cfg.min_lr at
// cfg.steps.
optim::LrSchedule lr_schedule(const RunConfig& cfg);

} // namespace headgrad::train
