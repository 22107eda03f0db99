#include "framework/optim/optimizer.hpp"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <numbers>
#include <optional>
#include <type_traits>

#include "framework/kernels/parallel.hpp"
#include "framework/kernels/vec_math.hpp"

namespace headgrad::optim {
namespace {

// Looks up `name` in a state list and checks its shape and dtype against `dst`; returns the
// entry. Loading checks every entry first and copies afterwards, so a refused state changes nothing.
const Tensor& find_state(const nn::NamedTensors& state, const std::string& name, const Tensor& dst,
                         const std::string& source) {
  for (const auto& [n, t] : state)
    if (n == name) {
      if (!(t.shape() == dst.shape()) || t.dtype() != dst.dtype())
        throw std::invalid_argument(fmt::format("{}: optimizer state '{}' is {} {}, expected {} {}", source, name,
                                                t.shape(), dtype_name(t.dtype()), dst.shape(),
                                                dtype_name(dst.dtype())));
      return t;
    }
  throw std::invalid_argument(fmt::format("{}: optimizer state '{}' is missing", source, name));
}

void copy_into(const Tensor& dst, const Tensor& src) {
  Tensor c = src.contiguous();
  std::memcpy(dst.raw(), c.raw(), static_cast<std::size_t>(dst.numel()) * dtype_size(dst.dtype()));
}

// The int64 step count `name` in `state`, if it is there; `required` makes its absence an error.
std::optional<std::int64_t> find_step(const nn::NamedTensors& state, const std::string& name, bool required,
                                      const std::string& source) {
  for (const auto& [n, t] : state)
    if (n == name) {
      if (t.dtype() != DType::i64 || t.numel() != 1)
        throw std::invalid_argument(fmt::format("{}: optimizer state '{}' must be one int64", source, name));
      const std::int64_t step = t.to_int_vector()[0];
      if (step < 0) throw std::invalid_argument(fmt::format("{}: optimizer state '{}' is {} < 0", source, name, step));
      return step;
    }
  if (required) throw std::invalid_argument(fmt::format("{}: optimizer state '{}' is missing", source, name));
  return std::nullopt;
}

// a * b + c rounded once, as PyTorch's vectorised CPU kernels compute `self + alpha * other`
// (add_, add with alpha: Vectorized::fmadd). For float32 the product of two floats is exact in
// double, so the double sum rounded to float is that fused result (a second rounding could differ
// only on an exact tie, about once in 2^29 operations) and it vectorises without FMA hardware.
template <typename T> inline T fused_multiply_add(T a, T b, T c) {
  if constexpr (std::is_same_v<T, float>) return static_cast<float>(double(a) * double(b) + double(c));
  else return std::fma(a, b, c);
}

} // namespace

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

void Optimizer::add_step_state(nn::NamedTensors& state) const {
  state.emplace_back("step", Tensor::from_ints({t_}, {}));
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (param_steps_[i] != t_) state.emplace_back("step." + params_[i].first, Tensor::from_ints({param_steps_[i]}, {}));
}

std::pair<std::int64_t, std::vector<std::int64_t>> Optimizer::read_steps(const nn::NamedTensors& state,
                                                                         const std::string& source) const {
  const std::int64_t step = *find_step(state, "step", true, source);
  std::vector<std::int64_t> per_param;
  for (const auto& [name, p] : params_) per_param.push_back(find_step(state, "step." + name, false, source).value_or(step));
  return {step, per_param};
}

void Optimizer::commit_steps(const std::pair<std::int64_t, std::vector<std::int64_t>>& steps) {
  t_ = steps.first;
  param_steps_ = steps.second;
}

SGD::SGD(nn::NamedTensors params, SGDOptions opt) : Optimizer(std::move(params)), opt_(opt) {
  lr_ = opt.lr;
  for (auto& [name, p] : params_) check_defined(p, "SGD", name.c_str());
  for (auto& [name, p] : params_) buf_.push_back(Tensor::zeros(p.shape(), p.dtype()));
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
      // p.add_(d_p, alpha=-lr): the scalar -lr rounded to T
      const T lr = static_cast<T>(lr_), wd = static_cast<T>(opt_.weight_decay), mom = static_cast<T>(opt_.momentum);
      for (std::int64_t k = 0, n = p.numel(); k < n; ++k) {
        T d = fused_multiply_add(w[k], wd, gr[k]); // d_p = grad.add(p, alpha=wd)
        if (mom != T(0)) {
          b[k] = first ? d : mom * b[k] + d; // buf = clone(d_p), then buf.mul_(momentum).add_(d_p)
          d = b[k];
        }
        w[k] = fused_multiply_add(d, -lr, w[k]); // p.add_(d_p, alpha=-lr)
      }
    });
  }
}

nn::NamedTensors SGD::state() const {
  nn::NamedTensors s;
  add_step_state(s);
  for (std::size_t i = 0; i < params_.size(); ++i) s.emplace_back("momentum_buffer." + params_[i].first, buf_[i]);
  return s;
}

void SGD::load_state(const nn::NamedTensors& state, const std::string& source) {
  const auto steps = read_steps(state, source);
  std::vector<const Tensor*> src;
  for (std::size_t i = 0; i < params_.size(); ++i)
    src.push_back(&find_state(state, "momentum_buffer." + params_[i].first, buf_[i], source));
  for (std::size_t i = 0; i < params_.size(); ++i) copy_into(buf_[i], *src[i]);
  commit_steps(steps);
}

Adam::Adam(nn::NamedTensors params, AdamOptions opt) : Optimizer(std::move(params)), opt_(opt) {
  lr_ = opt.lr;
  for (auto& [name, p] : params_) {
    check_defined(p, "Adam", name.c_str());
    m_.push_back(Tensor::zeros(p.shape(), p.dtype()));
    v_.push_back(Tensor::zeros(p.shape(), p.dtype()));
  }
}

void Adam::step() {
  ++t_;
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
      // __restrict: weight, gradient and both moments are separate buffers; saying so lets the
      // compiler vectorise the update (sqrt and division included).
      T* __restrict w = p.data<T>();
      const T* __restrict gr = g.data<T>();
      T* __restrict m = m_[i].data<T>();
      T* __restrict v = v_[i].data<T>();
      const T b1 = static_cast<T>(opt_.beta1), b2 = static_cast<T>(opt_.beta2), eps = static_cast<T>(opt_.eps);
      // 1 - beta in double, then rounded: 1 - 0.999f in float32 would be 0.00099998713, not 0.001
      const T one_minus_b1 = static_cast<T>(1.0 - opt_.beta1), one_minus_b2 = static_cast<T>(1.0 - opt_.beta2);
      const T wd = static_cast<T>(opt_.weight_decay), ss = static_cast<T>(step_size);
      const T bcs = static_cast<T>(bc2_sqrt);
      const T decay = static_cast<T>(1.0 - lr_ * opt_.weight_decay);
      const bool decoupled = opt_.decoupled;
      const std::int64_t n = p.numel();
      // ~10 flops and a sqrt per element
#pragma omp parallel for schedule(static) if (kernels::worth_threads(n, 4))
      for (std::int64_t k = 0; k < n; ++k) {
        T d = gr[k];
        if (decoupled) w[k] *= decay;                // AdamW: p.mul_(1 - lr * wd)
        else d = fused_multiply_add(w[k], wd, d);   // Adam: grad.add(p, alpha=wd)
        m[k] = fused_multiply_add(d, one_minus_b1, b1 * m[k]); // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        v[k] = fused_multiply_add(one_minus_b2 * d, d, b2 * v[k]); // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        w[k] -= ss * m[k] / (std::sqrt(v[k]) / bcs + eps); // p.addcdiv_(m, sqrt(v) / bc2_sqrt + eps, value=-ss)
      }
    });
  }
}

nn::NamedTensors Adam::state() const {
  nn::NamedTensors s;
  add_step_state(s);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    s.emplace_back("exp_avg." + params_[i].first, m_[i]);
    s.emplace_back("exp_avg_sq." + params_[i].first, v_[i]);
  }
  return s;
}

void Adam::load_state(const nn::NamedTensors& state, const std::string& source) {
  const auto steps = read_steps(state, source);
  std::vector<const Tensor*> m, v;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    m.push_back(&find_state(state, "exp_avg." + params_[i].first, m_[i], source));
    v.push_back(&find_state(state, "exp_avg_sq." + params_[i].first, v_[i], source));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    copy_into(m_[i], *m[i]);
    copy_into(v_[i], *v[i]);
  }
  commit_steps(steps);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  double sq = 0;
  for (const auto& p : params) check_defined(p, "clip_grad_norm", "a parameter");
  for (const auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_float(g.dtype(), "clip_grad_norm", [&]<typename T>() {
      const T* d = g.data<T>();
      // in double, over independent partial sums (one dependent add per element is latency-bound)
      sq += kernels::sum_lanes_fn<double>(g.numel(), [d](std::int64_t i) {
        return static_cast<double>(d[i]) * static_cast<double>(d[i]);
      });
    });
  }
  const double norm = std::sqrt(sq);
  if (!std::isfinite(norm) || norm <= max_norm) return norm;
  const double scale = max_norm / (norm + 1e-6); // PyTorch's clip_grad_norm_ uses the same 1e-6
  for (const auto& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_float(g.dtype(), "clip_grad_norm", [&]<typename T>() {
      T* d = g.data<T>();
      for (std::int64_t i = 0, n = g.numel(); i < n; ++i) d[i] *= static_cast<T>(scale);
    });
  }
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
