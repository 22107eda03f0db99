#include "framework/optim/optimizer.hpp"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <numbers>

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

std::int64_t restore_step(const nn::NamedTensors& state, const std::string& source) {
  for (const auto& [n, t] : state)
    if (n == "step") {
      if (t.dtype() != DType::i64 || t.numel() != 1)
        throw std::invalid_argument(fmt::format("{}: optimizer state 'step' must be one int64", source));
      return t.to_int_vector()[0];
    }
  throw std::invalid_argument(fmt::format("{}: optimizer state 'step' is missing", source));
}

} // namespace

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

SGD::SGD(nn::NamedTensors params, SGDOptions opt) : Optimizer(std::move(params)), opt_(opt) {
  lr_ = opt.lr;
  for (auto& [name, p] : params_) buf_.push_back(Tensor::zeros(p.shape(), p.dtype()));
}

void SGD::step() {
  ++t_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_float(p.dtype(), "SGD", [&]<typename T>() {
      T* w = p.data<T>();
      const T* gr = g.data<T>();
      T* b = buf_[i].data<T>();
      const T lr = static_cast<T>(lr_), wd = static_cast<T>(opt_.weight_decay), mom = static_cast<T>(opt_.momentum);
      for (std::int64_t k = 0, n = p.numel(); k < n; ++k) {
        T d = gr[k] + wd * w[k];
        if (mom != T(0)) {
          b[k] = t_ == 1 ? d : mom * b[k] + d;
          d = b[k];
        }
        w[k] -= lr * d;
      }
    });
  }
}

nn::NamedTensors SGD::state() const {
  nn::NamedTensors s{{"step", Tensor::from_ints({t_}, {})}};
  for (std::size_t i = 0; i < params_.size(); ++i) s.emplace_back("momentum_buffer." + params_[i].first, buf_[i]);
  return s;
}

void SGD::load_state(const nn::NamedTensors& state, const std::string& source) {
  const std::int64_t step = restore_step(state, source);
  std::vector<const Tensor*> src;
  for (std::size_t i = 0; i < params_.size(); ++i)
    src.push_back(&find_state(state, "momentum_buffer." + params_[i].first, buf_[i], source));
  for (std::size_t i = 0; i < params_.size(); ++i) copy_into(buf_[i], *src[i]);
  t_ = step;
}

Adam::Adam(nn::NamedTensors params, AdamOptions opt) : Optimizer(std::move(params)), opt_(opt) {
  lr_ = opt.lr;
  for (auto& [name, p] : params_) {
    m_.push_back(Tensor::zeros(p.shape(), p.dtype()));
    v_.push_back(Tensor::zeros(p.shape(), p.dtype()));
  }
}

void Adam::step() {
  ++t_;
  const double bc1 = 1.0 - std::pow(opt_.beta1, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(opt_.beta2, static_cast<double>(t_));
  const double step_size = lr_ / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    dispatch_float(p.dtype(), "Adam", [&]<typename T>() {
      // __restrict: weight, gradient and both moments are separate buffers; saying so lets the
      // compiler vectorise the update (sqrt and division included).
      T* __restrict w = p.data<T>();
      const T* __restrict gr = g.data<T>();
      T* __restrict m = m_[i].data<T>();
      T* __restrict v = v_[i].data<T>();
      const T b1 = static_cast<T>(opt_.beta1), b2 = static_cast<T>(opt_.beta2), eps = static_cast<T>(opt_.eps);
      const T wd = static_cast<T>(opt_.weight_decay), ss = static_cast<T>(step_size);
      const T bcs = static_cast<T>(bc2_sqrt);
      const T decay = static_cast<T>(1.0 - lr_ * opt_.weight_decay);
      const bool decoupled = opt_.decoupled;
      const std::int64_t n = p.numel();
      // ~10 flops and a sqrt per element
#pragma omp parallel for schedule(static) if (kernels::worth_threads(n, 4))
      for (std::int64_t k = 0; k < n; ++k) {
        T d = gr[k];
        if (decoupled) w[k] *= decay;   // AdamW: decay the weight itself
        else d += wd * w[k];            // Adam: L2 penalty folded into the gradient
        m[k] = b1 * m[k] + (T(1) - b1) * d;
        v[k] = b2 * v[k] + (T(1) - b2) * d * d;
        w[k] -= ss * m[k] / (std::sqrt(v[k]) / bcs + eps);
      }
    });
  }
}

nn::NamedTensors Adam::state() const {
  nn::NamedTensors s{{"step", Tensor::from_ints({t_}, {})}};
  for (std::size_t i = 0; i < params_.size(); ++i) {
    s.emplace_back("exp_avg." + params_[i].first, m_[i]);
    s.emplace_back("exp_avg_sq." + params_[i].first, v_[i]);
  }
  return s;
}

void Adam::load_state(const nn::NamedTensors& state, const std::string& source) {
  const std::int64_t step = restore_step(state, source);
  std::vector<const Tensor*> m, v;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    m.push_back(&find_state(state, "exp_avg." + params_[i].first, m_[i], source));
    v.push_back(&find_state(state, "exp_avg_sq." + params_[i].first, v_[i], source));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    copy_into(m_[i], *m[i]);
    copy_into(v_[i], *v[i]);
  }
  t_ = step;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  double sq = 0;
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
