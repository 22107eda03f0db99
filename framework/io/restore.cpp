#include "framework/io/restore.hpp"

#include <cstring>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "framework/core/autograd.hpp"

namespace headgrad::io {
namespace {

// Looks up `name` in a state list and checks its shape and dtype against `dst`; returns the
// entry. Loading checks every entry first and copies afterwards, so a refused state changes nothing.
const Tensor& find_state(const NamedTensors& state, const std::string& name, const Tensor& dst,
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
std::optional<std::int64_t> find_step(const NamedTensors& state, const std::string& name, bool required,
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

bool is_step_count(const std::string& name) { return name == "step" || name.starts_with("step."); }

} // namespace

void restore_parameters(const nn::Module& module, const NamedTensors& values, const std::string& source) {
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : values) given[name] = &t;
  const NamedTensors mine = module.named_parameters();
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

void restore_optimizer_state(optim::Optimizer& optimizer, const NamedTensors& state, const std::string& source) {
  const std::int64_t steps = *find_step(state, "step", true, source);
  std::vector<std::int64_t> param_steps;
  for (const auto& [name, p] : optimizer.params())
    param_steps.push_back(find_step(state, "step." + name, false, source).value_or(steps));
  // the buffers, which optimizer.state() hands out as they are (not copies)
  std::vector<std::pair<Tensor, const Tensor*>> copies;
  for (const auto& [name, dst] : optimizer.state())
    if (!is_step_count(name)) copies.emplace_back(dst, &find_state(state, name, dst, source));
  for (const auto& [dst, src] : copies) copy_into(dst, *src);
  optimizer.set_steps(steps, param_steps);
}

} // namespace headgrad::io
