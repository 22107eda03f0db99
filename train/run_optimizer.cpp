#include "train/run_optimizer.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& c, const nn::NamedTensors& params) {
  if (c.optimizer == "adam" || c.optimizer == "adamw") {
    optim::AdamOptions o;
    o.lr = c.lr;
    o.weight_decay = c.weight_decay;
    o.decoupled = c.optimizer == "adamw";
    return std::make_unique<optim::Adam>(params, o);
  }
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions{c.lr, c.momentum, c.weight_decay});
  throw std::invalid_argument(fmt::format("unknown optimizer '{}' (use adam, adamw or sgd)", c.optimizer));
}

optim::LrSchedule lr_schedule(const RunConfig& c) { return {c.lr, c.warmup, c.steps, c.schedule == "cosine"}; }

} // namespace headgrad::train
