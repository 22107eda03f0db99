// optimizer.hpp - SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW (AMSGrad),
// RMSprop and Adagrad with PyTorch's update rules, global-norm gradient clipping, and the
// learning-rate schedule.
//
// Update rules: torch.optim in torch 1.13, the single-tensor path (foreach=False: _single_tensor_sgd,
// _single_tensor_adam, ... in torch/optim/{sgd,adam,adamw,rmsprop,adagrad}.py), with its
// arithmetic: every scalar is formed in double as Python forms it (1 - beta1, 1 - beta2, lr / (1 -
// beta1^t), sqrt(1 - beta2^t), 1 - lr * wd, 1 - dampening) and rounded once to the parameter's
// dtype, and the elementwise steps run in the parameter's dtype in PyTorch's order. t is the
// parameter's own step count (PyTorch's state['step']): it advances only in a step() that finds a
// gradient on that parameter; a parameter without one is skipped entirely (its moments and step
// stay as they are).
//   SGD:   g = ±grad + wd * p  (-grad with maximize)
//          buf = g at the parameter's first step, then buf = momentum * buf + (1 - dampening) g
//          d = g + momentum * buf (nesterov) or buf (momentum != 0) or g;  p -= lr * d
//   Adam:  g = ±grad + wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g
//          amsgrad: vmax = max(vmax, v) (NaN stays), used for v below
//          p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW: p *= 1 - lr * wd, then Adam's step with wd = 0 (decoupled weight decay)
//   RMSprop: g = ±grad (+ wd * p);  s = alpha s + (1 - alpha) g g
//          centered: a = alpha a + (1 - alpha) g, avg = sqrt(s - a a) + eps; else avg = sqrt(s) + eps
//          momentum > 0: buf = momentum buf + g / avg, p -= lr buf;  else p -= lr g / avg
//   Adagrad: g = ±grad (+ wd * p);  s += g g (s starts at initial_accumulator_value)
//          p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps)
// tests/test_optim_golden.cpp holds every option to PyTorch float32 over 20 steps, bit for bit.
// The Adam update is one fused loop per parameter (no temporaries).
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
  // name: the optimizer's, for the message refusing an undefined parameter
  Optimizer(nn::ParameterList params, double lr, const char* name);
  virtual ~Optimizer() = default;
  virtual void step() = 0; // uses each parameter's grad; parameters without grad are skipped
  // step() reading every gradient times grad_scale (rounded to the gradient's dtype, the product
  // scale_to_max_norm would store in place), the gradients themselves left as they are: clipping
  // folded into the update, one pass over the gradients fewer. The same bits as scaling first.
  void step_scaled(double grad_scale);
  // Clears every parameter's gradient before the next backward. set_to_none (the default, as
  // torch.optim from torch 2.0): the gradient is dropped, so the next backward writes a fresh one
  // without a zero fill, and a parameter that gets no gradient in a step is skipped by step() -
  // its momentum, weight decay and Adam moments stand still, and its step count too.
  // set_to_none = false (torch 1.13's default, zero_grad(set_to_none=False)): each existing
  // gradient is filled with zeros in place (one that was never made stays undefined, as in
  // PyTorch), so such a parameter steps with a zero gradient: momentum and decay still move it,
  // Adam's moments decay and its step count advances. The default is the cheaper one and the one
  // whose step() matches "no gradient, no update"; pass false to reproduce a torch 1.13 loop.
  void zero_grad(bool set_to_none = true);
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  std::int64_t steps() const { return t_; } // step() calls so far
  // Parameter i's own step count: the step() calls that found a gradient on it (PyTorch's
  // state['step']); Adam's bias corrections use it.
  std::int64_t param_steps(std::size_t i) const { return param_steps_.at(i); }
  // Optimizer state as named tensors (for checkpoints), e.g. "exp_avg.blks.0.ffn.dense1.weight",
  // plus "step" (int64, the step() calls) and, for each parameter whose own count differs from it,
  // "step.<name>" (int64). The buffers are the optimizer's own (not copies): a checkpoint is read
  // back into them and into set_steps (io::restore_optimizer_state, framework/io/restore.hpp).
  virtual nn::NamedTensors state() const;
  // Sets the step() count and each parameter's own count (in params() order).
  virtual void set_steps(std::int64_t steps, const std::vector<std::int64_t>& param_steps);
  const nn::NamedTensors& params() const { return params_; }

protected:
  // The optimizer's buffers by PyTorch's state names ("exp_avg"), one tensor per parameter (an
  // empty list: a buffer this configuration does not keep); state() names them per parameter.
  virtual std::vector<std::pair<const char*, const std::vector<Tensor>*>> buffers() const { return {}; }
  std::vector<Tensor> param_buffers(double fill = 0.0) const; // a tensor like each parameter, filled

  nn::NamedTensors params_;
  double lr_;
  double grad_scale_ = 1.0; // step_scaled's factor while its step() runs (1 otherwise)
  std::int64_t t_ = 0;
  std::vector<std::int64_t> param_steps_ = std::vector<std::int64_t>(params_.size(), 0);
};

// torch.optim.SGD's options (maximize as its keyword). nesterov needs momentum > 0 and dampening
// 0, as in PyTorch (std::invalid_argument otherwise).
struct SGDOptions {
  double lr = 1e-2, momentum = 0.0, weight_decay = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  bool maximize = false; // ascend: step along +grad
};
class SGD : public Optimizer {
public:
  SGD(nn::ParameterList params, SGDOptions opt);
  void step() override;
private:
  std::vector<std::pair<const char*, const std::vector<Tensor>*>> buffers() const override;
  SGDOptions opt_;
  std::vector<Tensor> buf_; // momentum buffers, allocated on first step
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false; // true: AdamW
  bool amsgrad = false;   // normalise by the running max of v (Reddi et al., 2018); state "max_exp_avg_sq.<name>"
  bool maximize = false;  // ascend: step along +grad
};
class Adam : public Optimizer {
public:
  Adam(nn::ParameterList params, AdamOptions opt);
  void step() override;
private:
  std::vector<std::pair<const char*, const std::vector<Tensor>*>> buffers() const override;
  AdamOptions opt_;
  std::vector<Tensor> m_, v_, vmax_; // vmax_: amsgrad only
};

// torch.optim.RMSprop's options and defaults.
struct RMSpropOptions {
  double lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0.0, momentum = 0.0;
  bool centered = false; // normalise by the variance estimate s - a a: state "grad_avg.<name>"
  bool maximize = false;
};
class RMSprop : public Optimizer {
public:
  RMSprop(nn::ParameterList params, RMSpropOptions opt);
  void step() override;
private:
  // square_avg, momentum_buffer (momentum > 0), grad_avg (centered)
  std::vector<std::pair<const char*, const std::vector<Tensor>*>> buffers() const override;
  RMSpropOptions opt_;
  std::vector<Tensor> square_avg_, buf_, grad_avg_;
};

// torch.optim.Adagrad's options and defaults.
struct AdagradOptions {
  double lr = 1e-2, lr_decay = 0.0, weight_decay = 0.0, initial_accumulator_value = 0.0, eps = 1e-10;
  bool maximize = false;
};
class Adagrad : public Optimizer {
public:
  Adagrad(nn::ParameterList params, AdagradOptions opt);
  void step() override;
private:
  std::vector<std::pair<const char*, const std::vector<Tensor>*>> buffers() const override; // sum
  AdagradOptions opt_;
  std::vector<Tensor> sum_;
};

// torch.nn.utils.clip_grad_norm_ (torch 1.13): total_norm is the L2 norm of all gradients together
// (parameters without one are left out), and every gradient is multiplied by
//   min(1, max_norm / (total_norm + 1e-6))
// always, as PyTorch does: a norm a little below max_norm (within 1e-6) is scaled too, a NaN norm
// makes every gradient NaN, an infinite one makes the finite entries 0 and the infinite ones NaN.
// (A factor of exactly 1 is skipped: multiplying by 1 changes nothing.) Returns total_norm, before
// clipping. Difference: total_norm is accumulated in double, so it stays finite where PyTorch's
// float32 norm of float32 gradients overflows to inf (a sum of squares above 3.4e38: gradients of
// about 1e19) and would then zero every gradient; here they are scaled to max_norm. max_norm must
// be >= 0 (std::invalid_argument otherwise; PyTorch would flip the gradients' sign).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The two halves of clip_grad_norm, for a caller that looks at the norm before the gradients
// change (the trainer names a non-finite gradient before clipping would make them all NaN):
// total_norm as above, in double; and the scaling by min(1, max_norm / (total_norm + 1e-6)).
double grad_norm(const std::vector<Tensor>& params);
// The factor clip_grad_norm multiplies every gradient by: min(1, max_norm / (total_norm + 1e-6)),
// NaN for a NaN norm (max_norm >= 0, std::invalid_argument otherwise).
double clip_coefficient(double max_norm, double total_norm);
// grad_norm's parts: one gradient's sum of squares (in double, over independent partial sums), and
// the norm of the sums of the gradients there are, added in parameter order - what grad_norm
// returns, to the bit, for a caller that has the sums already (the trainer takes each while the
// gradient is in cache).
double grad_square_sum(const Tensor& grad);
double norm_of_square_sums(const std::vector<double>& sums);
void scale_to_max_norm(const std::vector<Tensor>& params, double max_norm, double total_norm);

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
