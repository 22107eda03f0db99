// run_optimizer.hpp - the optimizer and the learning-rate schedule a run config asks for.
#pragma once
#include <memory>

#include "framework/optim/optimizer.hpp"
#include "train/run_config.hpp"

namespace headgrad::train {

// Adam / AdamW (betas and eps: optim::AdamOptions' defaults, PyTorch's) or SGD over `params`;
// throws std::invalid_argument for an unknown cfg.optimizer.
std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& cfg, const nn::NamedTensors& params);

// Linear warmup over cfg.warmup steps to cfg.lr, then constant or cosine decay to 0 at cfg.steps.
optim::LrSchedule lr_schedule(const RunConfig& cfg);

} // namespace headgrad::train
