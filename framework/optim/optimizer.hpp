// optimizer.hpp - SGD (momentum, weight decay), Adam and AdamW with PyTorch's update rules,
// global-norm gradient clipping, and the learning-rate schedule.
//
// Update rules: torch.optim in torch 1.13, the single-tensor path (foreach=False: _single_tensor_sgd,
// _single_tensor_adam, _single_tensor_adamw in torch/optim/{sgd,adam,adamw}.py), with its
// arithmetic: every scalar is formed in double as Python forms it (1 - beta1, 1 - beta2, lr / (1 -
// beta1^t), sqrt(1 - beta2^t), 1 - lr * wd) and rounded once to the parameter's dtype, and the
// elementwise steps run in the parameter's dtype in PyTorch's order. t is the parameter's own
// step count (PyTorch's state['step']): it advances only in a step() that finds a gradient on that
// parameter; a parameter without one is skipped entirely (its moments and step stay as they are).
//   SGD:   g = grad + wd * p;  buf = momentum * buf + g (buf = g at the parameter's first step);
//          p -= lr * buf     (dampening 0, no Nesterov)
//   Adam:  g = grad + wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g
//          p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW: p *= 1 - lr * wd, then Adam's step with wd = 0 (decoupled weight decay)
// tests/test_optim_golden.cpp holds all three to PyTorch float32 over 20 steps. The Adam update is
// one fused loop per parameter (no temporaries).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/nn/module.hpp"

namespace headgrad::optim {

class Optimizer {
public:
  explicit Optimizer(nn::NamedTensors params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  virtual void step() = 0; // uses each parameter's grad; parameters without grad are skipped
  void zero_grad();
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  std::int64_t steps() const { return t_; } // step() calls so far
  // Parameter i's own step count: the step() calls that found a gradient on it (PyTorch's
  // state['step']); Adam's bias corrections use it.
  std::int64_t param_steps(std::size_t i) const { return param_steps_.at(i); }
  // Optimizer state as named tensors (for checkpoints), e.g. "exp_avg.blks.0.ffn.dense1.weight",
  // plus "step" (int64, the step() calls) and, for each parameter whose own count differs from it,
  // "step.<name>" (int64). A state without "step.<name>" gives that parameter "step": states
  // written before per-parameter counts existed load unchanged. load_state refuses
  // missing/mismatched entries with invalid_argument and then changes nothing.
  virtual nn::NamedTensors state() const = 0;
  virtual void load_state(const nn::NamedTensors& state, const std::string& source) = 0;
  const nn::NamedTensors& params() const { return params_; }

protected:
  void add_step_state(nn::NamedTensors& state) const;
  // The step counts in `state` ("step", "step.<name>"), checked; commit_steps sets them once
  // every other entry has been checked too.
  std::pair<std::int64_t, std::vector<std::int64_t>> read_steps(const nn::NamedTensors& state,
                                                                  const std::string& source) const;
  void commit_steps(const std::pair<std::int64_t, std::vector<std::int64_t>>& steps);

  nn::NamedTensors params_;
  double lr_ = 1e-3;
  std::int64_t t_ = 0;
  std::vector<std::int64_t> param_steps_ = std::vector<std::int64_t>(params_.size(), 0);
};

struct SGDOptions {
  double lr = 1e-2, momentum = 0.0, weight_decay = 0.0;
};
class SGD : public Optimizer {
public:
  SGD(nn::NamedTensors params, SGDOptions opt);
  void step() override;
  nn::NamedTensors state() const override;
  void load_state(const nn::NamedTensors& state, const std::string& source) override;
private:
  SGDOptions opt_;
  std::vector<Tensor> buf_; // momentum buffers, allocated on first step
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false; // true: AdamW
};
class Adam : public Optimizer {
public:
  Adam(nn::NamedTensors params, AdamOptions opt);
  void step() override;
  nn::NamedTensors state() const override;
  void load_state(const nn::NamedTensors& state, const std::string& source) override;
private:
  AdamOptions opt_;
  std::vector<Tensor> m_, v_;
};

// Scales every gradient by min(1, max_norm / total_norm) where total_norm is the L2 norm of all
// gradients together. Returns total_norm (before clipping); NaN/Inf norms are returned as is.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// Linear warmup from 0 to base_lr over `warmup` steps, then constant or cosine decay to min_lr at
// `total` steps (nanoGPT's get_lr: min_lr + 0.5 (1 + cos(pi progress)) (base_lr - min_lr)). step
// counts from 1.
struct LrSchedule {
  double base_lr = 1e-3;
  std::int64_t warmup = 0, total = 1;
  bool cosine = false;
  double min_lr = 0.0;
  double at(std::int64_t step) const;
};

} // namespace headgrad::optim
