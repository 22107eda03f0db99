#include "framework/core/gradcheck.hpp"

#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/random.hpp"

namespace headgrad {

std::string GradcheckResult::summary() const {
  std::string s;
  for (const auto& r : inputs) {
    if (!r.checked) continue;
    s += fmt::format("{} {}: max abs err {:.3e}, max rel err {:.3e}{}\n", r.name, r.shape, r.max_abs_err,
                     r.max_rel_err,
                     r.ok ? "" : fmt::format(" FAIL at flat index {} (analytical {:.8g}, numerical {:.8g})",
                                             r.worst_index, r.analytical_at_worst, r.numerical_at_worst));
  }
  return s;
}

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  // Float64 leaf copies, so perturbing them touches nobody else's data.
  std::vector<Tensor> xs;
  for (const auto& t : inputs) {
    if (is_float(t.dtype())) {
      Tensor c;
      {
        NoGradGuard ng;
        c = t.to(DType::f64).clone().detach();
      }
      c.set_requires_grad(true);
      xs.push_back(c);
    } else {
      xs.push_back(t);
    }
  }
  return gradcheck_leaves([&]() { return fn(xs); }, xs, opt);
}

GradcheckResult gradcheck_leaves(const std::function<Tensor()>& fn, const std::vector<Tensor>& xs,
                                 const GradcheckOptions& opt) {
  NamedTensors named;
  for (std::size_t k = 0; k < xs.size(); ++k) named.emplace_back(fmt::format("input {}", k), xs[k]);
  return gradcheck_leaves(fn, named, opt);
}

GradcheckResult gradcheck_leaves(const std::function<Tensor()>& fn, const NamedTensors& leaves,
                                 const GradcheckOptions& opt) {
  std::vector<Tensor> xs;
  for (const auto& [name, t] : leaves) {
    check_defined(t, "gradcheck_leaves", name.c_str());
    xs.push_back(t);
  }
  for (const auto& t : xs)
    if (is_float(t.dtype()) && (t.dtype() != DType::f64 || !t.is_leaf() || !t.requires_grad() || !t.is_contiguous()))
      throw std::invalid_argument(fmt::format("gradcheck_leaves: every float input must be a contiguous float64 leaf "
                                              "that requires grad; got {} {}", t.shape(), dtype_name(t.dtype())));
  for (const auto& t : xs)
    if (t.defined() && is_float(t.dtype())) Tensor(t).zero_grad();
  Tensor y = fn();
  if (!y.defined() || y.dtype() != DType::f64)
    throw std::invalid_argument("gradcheck: the function must return a float64 tensor for float64 inputs");
  Generator gen(opt.seed);
  const Tensor R = Tensor::normal(y.shape(), 0.0, 1.0, gen, DType::f64);
  const std::vector<double> r = R.to_vector();
  if (y.requires_grad()) y.backward(R);

  auto loss = [&]() {
    NoGradGuard ng;
    const std::vector<double> v = fn().to_vector();
    double s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += v[i] * r[i];
    return s;
  };

  GradcheckResult result;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    GradcheckInputReport rep;
    rep.input = static_cast<int>(k);
    rep.name = leaves[k].first;
    rep.shape = xs[k].shape();
    if (!is_float(xs[k].dtype())) {
      result.inputs.push_back(rep);
      continue;
    }
    rep.checked = true;
    const Tensor g = xs[k].grad();
    const std::vector<double> analytical =
        g.defined() ? g.to_vector() : std::vector<double>(static_cast<std::size_t>(xs[k].numel()), 0.0);
    double* p = xs[k].data<double>(); // leaf copies are contiguous
    double worst_violation = 0;
    for (std::int64_t i = 0; i < xs[k].numel(); ++i) {
      const double orig = p[i];
      p[i] = orig + opt.eps;
      const double lp = loss();
      p[i] = orig - opt.eps;
      const double lm = loss();
      p[i] = orig;
      const double num = (lp - lm) / (2 * opt.eps);
      const double ana = analytical[static_cast<std::size_t>(i)];
      const double err = std::abs(ana - num);
      const double rel = err / std::max(std::abs(num), opt.atol);
      rep.max_abs_err = std::max(rep.max_abs_err, err);
      rep.max_rel_err = std::max(rep.max_rel_err, rel);
      const double violation = err - (opt.atol + opt.rtol * std::abs(num));
      if (!(violation <= 0)) rep.ok = false; // NaN fails too
      if (rep.worst_index < 0 || violation > worst_violation || std::isnan(violation)) {
        worst_violation = violation;
        rep.worst_index = i;
        rep.analytical_at_worst = ana;
        rep.numerical_at_worst = num;
      }
    }
    result.ok = result.ok && rep.ok;
    result.inputs.push_back(rep);
  }
  return result;
}

} // namespace headgrad
