#include "framework/nn/module.hpp"

#include <cstring>
#include <fmt/format.h>
#include <map>

#include "framework/autograd.hpp"

namespace headgrad::nn {

Tensor Module::register_parameter(std::string name, Tensor value) {
  value.set_requires_grad(true);
  params_.emplace_back(std::move(name), value);
  return value;
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& t : parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& t : parameters()) t.zero_grad();
}

void Module::load_parameters(const NamedTensors& values, const std::string& source) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : values) given[name] = &t;
  const NamedTensors mine = named_parameters();
  for (const auto& [name, p] : mine) {
    auto it = given.find(name);
    if (it == given.end())
      throw std::invalid_argument(fmt::format("{}: missing parameter '{}' (expected shape {})", source, name, p.shape()));
    const Tensor& v = *it->second;
    if (!(v.shape() == p.shape()))
      throw std::invalid_argument(fmt::format("{}: parameter '{}' has shape {} but the model expects {}", source, name,
                                              v.shape(), p.shape()));
    if (!is_float(v.dtype()))
      throw std::invalid_argument(fmt::format("{}: parameter '{}' has dtype {}, expected a float type", source, name,
                                              dtype_name(v.dtype())));
  }
  // Compare against `values`, not the map `given`: a duplicated name collapses in the map.
  if (values.size() != mine.size()) {
    std::map<std::string, int> seen;
    for (const auto& [name, p] : mine) seen[name] = 0;
    for (const auto& [name, t] : values) {
      auto it = seen.find(name);
      if (it == seen.end())
        throw std::invalid_argument(fmt::format("{}: unexpected parameter '{}' (shape {})", source, name, t.shape()));
      if (++it->second > 1)
        throw std::invalid_argument(fmt::format("{}: parameter '{}' appears twice", source, name));
    }
  }
  // Checked everything first: a refused file changes nothing.
  NoGradGuard ng;
  for (const auto& [name, p] : mine) {
    Tensor v = given[name]->to(p.dtype()).contiguous();
    std::memcpy(p.raw(), v.raw(), static_cast<std::size_t>(p.numel()) * dtype_size(p.dtype()));
  }
}

void Module::share_parameters(const Module& source) {
  const NamedTensors mine = named_parameters(), theirs = source.named_parameters();
  bool same = mine.size() == theirs.size();
  for (std::size_t i = 0; same && i < mine.size(); ++i)
    same = mine[i].first == theirs[i].first && mine[i].second.shape() == theirs[i].second.shape() &&
           mine[i].second.dtype() == theirs[i].second.dtype();
  if (!same)
    throw std::invalid_argument(fmt::format("share_parameters: the modules differ ({} and {} parameters, or names, "
                                            "shapes or dtypes)",
                                            mine.size(), theirs.size()));
  for (std::size_t i = 0; i < mine.size(); ++i) {
    TensorImpl* p = mine[i].second.impl();
    const TensorImpl* s = theirs[i].second.impl();
    p->storage = s->storage;
    p->offset = s->offset;
    p->strides = s->strides;
    p->grad.reset();
  }
}

} // namespace headgrad::nn
