#include "framework/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <numbers>
#include <type_traits>

#include "framework/engine/kernels.hpp"

// The book's loops of the Adam update and of the gradient norm's sums of squares.
namespace headgrad::book {

// One parameter's Adam / AdamW update, element by element (torch.optim.Adam and AdamW, PyTorch 1.13,
// single-tensor path; c holds the step's scalars, formed by optim::Adam::step):
//   g = sign grad_scale grad                    (sign -1 with maximize; grad_scale: clipping)
//   AdamW: w *= 1 - lr wd        Adam: g += wd w
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  AMSGrad (vmax not null): vmax = max(vmax, v)
//   w -= step_size m / (sqrt(v, or vmax) / sqrt(bias_correction2) + eps)
template <typename T>
void adam_update(T* w, const T* gr, T* m, T* v, T* vmax, std::int64_t n, const kernels::AdamScalars<T>& c) {
  for (std::int64_t k = 0; k < n; ++k) {
    T g = c.sign * (gr[k] * c.grad_scale);
    if (c.decoupled) w[k] = w[k] * c.decay;
    else g = g + c.wd * w[k];
    m[k] = c.b1 * m[k] + c.one_minus_b1 * g;
    v[k] = c.b2 * v[k] + c.one_minus_b2 * g * g;
    if (vmax) vmax[k] = vmax[k] > v[k] || vmax[k] != vmax[k] ? vmax[k] : v[k]; // torch.maximum: a NaN wins
    w[k] = w[k] - c.step_size * m[k] / (std::sqrt(vmax ? vmax[k] : v[k]) / c.bc2_sqrt + c.eps);
  }
}
HEADGRAD_BOOK_LOOP(adam_update);

// sum_i x[i]^2, in double (the gradient norm of clip_grad_norm).
template <typename T> double square_sum(const T* x, std::int64_t n) {
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return sum;
}
HEADGRAD_BOOK_LOOP(square_sum);

} // namespace headgrad::book

namespace headgrad::optim {
namespace {

// a * b + c rounded once, as PyTorch's vectorised CPU kernels compute `self + alpha * other`
// (add_, add with alpha: Vectorized::fmadd). For float32 the product of two floats is exact in
// double, so the double sum rounded to float is that fused result (a second rounding could differ
// only on an exact tie, about once in 2^29 operations); std::fma is exact by definition.
template <typename T> T fused_multiply_add(T a, T b, T c) {
  if constexpr (std::is_same_v<T, float>) return static_cast<float>(double(a) * double(b) + double(c));
  else return std::fma(a, b, c);
}

} // namespace

Optimizer::Optimizer(nn::ParameterList params, double lr, const char* name) : params_(std::move(params)), lr_(lr) {
  for (auto& [pname, p] : params_) check_defined(p, name, pname.c_str());
}

std::vector<Tensor> Optimizer::param_buffers(double fill) const {
  std::vector<Tensor> out;
  for (const auto& [name, p] : params_) out.push_back(Tensor::full(p.shape(), fill, p.dtype()));
  return out;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& [name, p] : params_) {
    if (set_to_none) {
      Tensor(p).zero_grad();
      continue;
    }
    const Tensor g = p.grad(); // a leaf's gradient: its own contiguous buffer (autograd.cpp)
    if (g.defined())
      dispatch_float(g.dtype(), "zero_grad", [&]<typename T>() { std::fill(g.data<T>(), g.data<T>() + g.numel(), T(0)); });
  }
}

void Optimizer::step_scaled(double grad_scale) {
  struct Reset { // back to 1 however step() ends
    double& s;
    ~Reset() { s = 1.0; }
  } reset{grad_scale_};
  grad_scale_ = grad_scale;
  step();
}

nn::NamedTensors Optimizer::state() const {
  nn::NamedTensors state;
  state.emplace_back("step", Tensor::from_ints({t_}, {}));
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (param_steps_[i] != t_) state.emplace_back("step." + params_[i].first, Tensor::from_ints({param_steps_[i]}, {}));
  const auto kept = buffers();
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (const auto& [name, list] : kept)
      if (!list->empty()) state.emplace_back(name + ("." + params_[i].first), (*list)[i]);
  return state;
}

void Optimizer::set_steps(std::int64_t steps, const std::vector<std::int64_t>& param_steps) {
  if (param_steps.size() != params_.size())
    throw std::logic_error(fmt::format("Optimizer::set_steps: {} step counts for {} parameters", param_steps.size(),
                                       params_.size()));
  t_ = steps;
  param_steps_ = param_steps;
}

SGD::SGD(nn::ParameterList params, SGDOptions opt) : Optimizer(std::move(params), opt.lr, "SGD"), opt_(opt) {
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0)) // as torch.optim.SGD
    throw std::invalid_argument(fmt::format("SGD: nesterov needs momentum > 0 and dampening 0, got momentum {} and "
                                            "dampening {}",
                                            opt.momentum, opt.dampening));
  buf_ = param_buffers();
}

void SGD::step() {
  ++t_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue; // PyTorch skips it: no buffer update, no step
    const bool first = param_steps_[i]++ == 0; // PyTorch's momentum_buffer is None until then
    dispatch_float(p.dtype(), "SGD", [&]<typename T>() {
      T* w = p.data<T>();
      const T* gr = g.data<T>();
      T* b = buf_[i].data<T>();
      // p.add_(d_p, alpha=-lr): the scalar -lr rounded to T; alpha = 1 - dampening formed in double
      const T lr = static_cast<T>(lr_), wd = static_cast<T>(opt_.weight_decay), mom = static_cast<T>(opt_.momentum);
      const T undamped = static_cast<T>(1.0 - opt_.dampening);
      const bool nesterov = opt_.nesterov, maximize = opt_.maximize;
      const T scale = static_cast<T>(grad_scale_); // (step_scaled: the clipped gradient)
      for (std::int64_t k = 0, n = p.numel(); k < n; ++k) {
        const T g = maximize ? -(gr[k] * scale) : gr[k] * scale; // d_p = -grad with maximize
        T d = fused_multiply_add(w[k], wd, g); // d_p = d_p.add(p, alpha=wd)
        if (mom != T(0)) {
          // buf = clone(d_p), then buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
          b[k] = first ? d : fused_multiply_add(d, undamped, mom * b[k]);
          d = nesterov ? fused_multiply_add(b[k], mom, d) : b[k]; // d_p.add(buf, alpha=momentum), or buf
        }
        w[k] = fused_multiply_add(d, -lr, w[k]); // p.add_(d_p, alpha=-lr)
      }
    });
  }
}

std::vector<std::pair<const char*, const std::vector<Tensor>*>> SGD::buffers() const {
  return {{"momentum_buffer", &buf_}};
}

Adam::Adam(nn::ParameterList params, AdamOptions opt)
    : Optimizer(std::move(params), opt.lr, "Adam"), opt_(opt), m_(param_buffers()), v_(param_buffers()) {
  if (opt.amsgrad) vmax_ = param_buffers();
}

void Adam::step() {
  ++t_;
  // each parameter's update over chunks of its elements (kernels::parallel_chunks): jobs[j] updates [b, e)
  std::vector<std::function<void(std::int64_t, std::int64_t)>> jobs;
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue; // PyTorch skips it: its moments and its step stay as they are
    const double t = static_cast<double>(++param_steps_[i]);
    // in double, as PyTorch forms them in Python: bias_correction1, step_size, bias_correction2_sqrt
    const double bc1 = 1.0 - std::pow(opt_.beta1, t);
    const double bc2 = 1.0 - std::pow(opt_.beta2, t);
    const double step_size = lr_ / bc1;
    const double bc2_sqrt = std::sqrt(bc2);
    dispatch_float(p.dtype(), "Adam", [&]<typename T>() {
      T* w = p.data<T>();
      const T* gr = g.data<T>();
      T* m = m_[i].data<T>();
      T* v = v_[i].data<T>();
      T* vmax = opt_.amsgrad ? vmax_[i].data<T>() : nullptr;
      const T b1 = static_cast<T>(opt_.beta1), b2 = static_cast<T>(opt_.beta2), eps = static_cast<T>(opt_.eps);
      // 1 - beta in double, then rounded: 1 - 0.999f in float32 would be 0.00099998713, not 0.001
      const T one_minus_b1 = static_cast<T>(1.0 - opt_.beta1), one_minus_b2 = static_cast<T>(1.0 - opt_.beta2);
      const T wd = static_cast<T>(opt_.weight_decay), ss = static_cast<T>(step_size);
      const T bcs = static_cast<T>(bc2_sqrt);
      const T decay = static_cast<T>(1.0 - lr_ * opt_.weight_decay);
      const kernels::AdamScalars<T> c{b1, b2, one_minus_b1, one_minus_b2, eps, wd, ss, bcs, decay,
                                      opt_.maximize ? T(-1) : T(1), opt_.decoupled, static_cast<T>(grad_scale_)};
      jobs.push_back([=](std::int64_t b, std::int64_t e) { // per element: kernels::adam_update
        kernels::adam_update<T>(w + b, gr + b, m + b, v + b, vmax ? vmax + b : nullptr, e - b, c);
      });
      sizes.push_back(p.numel());
    });
  }
  kernels::parallel_chunks(sizes, 4, [&jobs](std::size_t j, std::int64_t b, std::int64_t e) { jobs[j](b, e); });
}

std::vector<std::pair<const char*, const std::vector<Tensor>*>> Adam::buffers() const {
  return {{"exp_avg", &m_}, {"exp_avg_sq", &v_}, {"max_exp_avg_sq", &vmax_}};
}

RMSprop::RMSprop(nn::ParameterList params, RMSpropOptions opt)
    : Optimizer(std::move(params), opt.lr, "RMSprop"), opt_(opt), square_avg_(param_buffers()) {
  if (opt.momentum > 0) buf_ = param_buffers();
  if (opt.centered) grad_avg_ = param_buffers();
}

// PyTorch's elementwise steps, each rounded to T: mul_(alpha); addcmul_, self + (value * t1) * t2
// with the last product and the sum rounded once (GCC fuses them in torch's vectorised kernel);
// addcdiv_, self + (value * t1) / t2; add with alpha, one fused rounding (fused_multiply_add).
void RMSprop::step() {
  ++t_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    const Tensor gt = p.grad();
    if (!gt.defined()) continue;
    ++param_steps_[i];
    dispatch_float(p.dtype(), "RMSprop", [&]<typename T>() {
      T *w = p.data<T>(), *s = square_avg_[i].data<T>();
      T* b = opt_.momentum > 0 ? buf_[i].data<T>() : nullptr;
      T* a = opt_.centered ? grad_avg_[i].data<T>() : nullptr;
      const T* gr = gt.data<T>();
      const T alpha = static_cast<T>(opt_.alpha), rest = static_cast<T>(1.0 - opt_.alpha);
      const T wd = static_cast<T>(opt_.weight_decay), eps = static_cast<T>(opt_.eps), scale = static_cast<T>(grad_scale_);
      const T mom = static_cast<T>(opt_.momentum), lr = static_cast<T>(lr_), minus_lr = static_cast<T>(-lr_);
      for (std::int64_t k = 0, n = p.numel(); k < n; ++k) {
        T g = opt_.maximize ? -(gr[k] * scale) : gr[k] * scale;
        if (opt_.weight_decay != 0) g = fused_multiply_add(w[k], wd, g); // grad.add(param, alpha=wd)
        s[k] = fused_multiply_add(rest * g, g, s[k] * alpha);             // mul_(alpha).addcmul_(g, g, 1 - alpha)
        T avg = std::sqrt(s[k]);
        if (a) {
          a[k] = fused_multiply_add(g, rest, a[k] * alpha); // grad_avg.mul_(alpha).add_(g, alpha=1 - alpha)
          avg = std::sqrt(fused_multiply_add(-a[k], a[k], s[k])); // square_avg.addcmul(a, a, value=-1).sqrt_()
        }
        avg = avg + eps;
        if (b) {
          b[k] = b[k] * mom + g / avg;               // buf.mul_(momentum).addcdiv_(g, avg)
          w[k] = fused_multiply_add(b[k], -lr, w[k]); // param.add_(buf, alpha=-lr)
        } else {
          w[k] = w[k] + minus_lr * g / avg; // param.addcdiv_(g, avg, value=-lr)
        }
      }
    });
  }
}

std::vector<std::pair<const char*, const std::vector<Tensor>*>> RMSprop::buffers() const {
  return {{"square_avg", &square_avg_}, {"momentum_buffer", &buf_}, {"grad_avg", &grad_avg_}};
}

Adagrad::Adagrad(nn::ParameterList params, AdagradOptions opt)
    : Optimizer(std::move(params), opt.lr, "Adagrad"), opt_(opt), sum_(param_buffers(opt.initial_accumulator_value)) {}

void Adagrad::step() {
  ++t_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    const Tensor gt = p.grad();
    if (!gt.defined()) continue;
    const double t = static_cast<double>(++param_steps_[i]);
    const double clr = lr_ / (1 + (t - 1) * opt_.lr_decay); // in double, as Python forms it
    dispatch_float(p.dtype(), "Adagrad", [&]<typename T>() {
      T *w = p.data<T>(), *s = sum_[i].data<T>();
      const T* gr = gt.data<T>();
      const T wd = static_cast<T>(opt_.weight_decay), eps = static_cast<T>(opt_.eps), scale = static_cast<T>(grad_scale_);
      const T minus_clr = static_cast<T>(-clr);
      for (std::int64_t k = 0, n = p.numel(); k < n; ++k) {
        T g = opt_.maximize ? -(gr[k] * scale) : gr[k] * scale;
        if (opt_.weight_decay != 0) g = fused_multiply_add(w[k], wd, g); // grad.add(param, alpha=wd)
        s[k] = fused_multiply_add(g, g, s[k]);                            // state_sum.addcmul_(g, g, value=1)
        w[k] = w[k] + minus_clr * g / (std::sqrt(s[k]) + eps); // param.addcdiv_(g, sqrt(sum) + eps, value=-clr)
      }
    });
  }
}

std::vector<std::pair<const char*, const std::vector<Tensor>*>> Adagrad::buffers() const { return {{"sum", &sum_}}; }

double grad_square_sum(const Tensor& g) {
  double sum = 0;
  dispatch_float(g.dtype(), "clip_grad_norm",
                 [&]<typename T>() { sum = kernels::square_sum<T>(g.data<T>(), g.numel()); });
  return sum;
}

double norm_of_square_sums(const std::vector<double>& sums) {
  double sq = 0;
  for (const double x : sums) sq += x;
  return std::sqrt(sq);
}

double grad_norm(const std::vector<Tensor>& params) {
  for (const auto& p : params) check_defined(p, "clip_grad_norm", "a parameter");
  // Each gradient's sum of squares on one thread, the gradients spread over the threads, then the
  // sums added in parameter order: the same bits on any number of threads.
  std::vector<Tensor> grads;
  std::int64_t total = 0;
  for (const auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    total += g.numel();
    dispatch_float(g.dtype(), "clip_grad_norm", []<typename T>() {}); // (a wrong dtype throws here, not in the threads)
    grads.push_back(std::move(g));
  }
  std::vector<double> sums(grads.size());
  const auto count = static_cast<std::int64_t>(grads.size());
  kernels::parallel_tasks(count, total, 2, [&](std::int64_t j) {
    sums[static_cast<std::size_t>(j)] = grad_square_sum(grads[static_cast<std::size_t>(j)]);
  });
  return norm_of_square_sums(sums);
}

double clip_coefficient(double max_norm, double norm) {
  if (!(max_norm >= 0))
    throw std::invalid_argument(fmt::format("clip_grad_norm: max_norm must be >= 0, got {}", max_norm));
  // clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1 (a NaN stays NaN, as
  // torch.clamp keeps it)
  const double coef = max_norm / (norm + 1e-6);
  return coef > 1 ? 1.0 : coef;
}

void scale_to_max_norm(const std::vector<Tensor>& params, double max_norm, double norm) {
  const double clamped = clip_coefficient(max_norm, norm); // then every gradient times it
  if (clamped == 1.0) return; // times 1: nothing changes
  std::vector<std::function<void(std::int64_t, std::int64_t)>> jobs; // jobs[j] scales [b, e) of gradient j
  std::vector<std::int64_t> sizes;
  for (const auto& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_float(g.dtype(), "clip_grad_norm", [&]<typename T>() {
      jobs.push_back([d = g.data<T>(), c = static_cast<T>(clamped)](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) d[i] *= c;
      });
    });
    sizes.push_back(g.numel());
  }
  kernels::parallel_chunks(sizes, 1, [&jobs](std::size_t j, std::int64_t b, std::int64_t e) { jobs[j](b, e); });
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  for (const auto& p : params) check_defined(p, "clip_grad_norm", "a parameter");
  if (!(max_norm >= 0))
    throw std::invalid_argument(fmt::format("clip_grad_norm: max_norm must be >= 0, got {}", max_norm));
  const double norm = grad_norm(params);
  scale_to_max_norm(params, max_norm, norm);
  return norm;
}

double LrSchedule::at(std::int64_t step) const {
  if (warmup > 0 && step <= warmup) return base_lr * static_cast<double>(step) / static_cast<double>(warmup);
  if (!cosine) return base_lr;
  const double span = static_cast<double>(std::max<std::int64_t>(total - warmup, 1));
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

} // namespace headgrad::optim
