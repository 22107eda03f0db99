#include "train/run/run_optimizer.hpp"

#include <fmt/format.h>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace headgrad::train {
namespace {

// Two parameter groups, as torch.optim's param_groups: one optimizer of the same kind for each
// (with and without weight decay), seen as one. The state of both is one set of named tensors
// (parameter names are distinct; both count the same steps).
class GroupedOptimizer : public optim::Optimizer {
public:
  GroupedOptimizer(nn::NamedTensors all, std::unique_ptr<optim::Optimizer> decayed,
                   std::unique_ptr<optim::Optimizer> plain)
      : Optimizer(std::move(all), decayed->lr(), "optimizer"), decayed_(std::move(decayed)), plain_(std::move(plain)) {}
  void step() override {
    for (auto* g : {decayed_.get(), plain_.get()}) {
      g->set_lr(lr_);
      g->step_scaled(grad_scale_);
    }
    ++t_;
  }
  nn::NamedTensors state() const override {
    nn::NamedTensors s = decayed_->state();
    for (auto& [name, t] : plain_->state())
      if (name != "step") s.emplace_back(name, t);
    return s;
  }
  // Each group's counts are its own parameters' (by name).
  void set_steps(std::int64_t steps, const std::vector<std::int64_t>& param_steps) override {
    Optimizer::set_steps(steps, param_steps);
    std::map<std::string, std::int64_t> by_name;
    for (std::size_t i = 0; i < params_.size(); ++i) by_name[params_[i].first] = param_steps[i];
    for (auto* g : {decayed_.get(), plain_.get()}) {
      std::vector<std::int64_t> own;
      for (const auto& [name, p] : g->params()) own.push_back(by_name.at(name));
      g->set_steps(steps, own);
    }
  }

private:
  std::unique_ptr<optim::Optimizer> decayed_, plain_;
};

std::unique_ptr<optim::Optimizer> one_group(const RunConfig& c, const nn::NamedTensors& params, double weight_decay) {
  if (c.optimizer == "adam" || c.optimizer == "adamw") {
    optim::AdamOptions o;
    o.lr = c.lr;
    o.beta2 = c.beta2;
    o.weight_decay = weight_decay;
    o.decoupled = c.optimizer == "adamw";
    return std::make_unique<optim::Adam>(params, o);
  }
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions{c.lr, c.momentum, weight_decay});
  throw std::invalid_argument(fmt::format("unknown optimizer '{}' (use adam, adamw or sgd)", c.optimizer));
}

} // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const RunConfig& c, const nn::NamedTensors& params) {
  if (c.decay != "matrices") return one_group(c, params, c.weight_decay);
  nn::NamedTensors decayed, plain;
  for (const auto& [name, p] : params) (p.dim() >= 2 ? decayed : plain).emplace_back(name, p);
  return std::make_unique<GroupedOptimizer>(params, one_group(c, decayed, c.weight_decay), one_group(c, plain, 0.0));
}

optim::LrSchedule lr_schedule(const RunConfig& c) {
  return {c.lr, c.warmup, c.steps, c.schedule == "cosine", c.min_lr};
}

} // namespace headgrad::train
