#include "framework/nn/module.hpp"

#include <cxxabi.h>
#include <functional>
#include <fmt/format.h>
#include <memory>
#include <ostream>
#include <typeinfo>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::nn {

ParameterList::ParameterList(const std::vector<Tensor>& plain) {
  for (std::size_t i = 0; i < plain.size(); ++i) emplace_back(std::to_string(i), plain[i]);
}

namespace {

// "headgrad::nn::Linear" -> "Linear": the class's own name, its namespaces dropped.
std::string type_name(const Module& m) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> full(abi::__cxa_demangle(typeid(m).name(), nullptr, nullptr, &status),
                                                    std::free);
  const std::string name = status == 0 ? full.get() : typeid(m).name();
  const auto cut = name.rfind("::", name.find('<'));
  return cut == std::string::npos ? name : name.substr(cut + 2);
}

} // namespace

std::string summary(const Module& m) {
  std::string out;
  const std::function<void(const Module&, const std::string&, const std::string&)> walk =
      [&](const Module& mod, const std::string& label, const std::string& indent) {
        out += fmt::format("{}{}{}: {} parameters\n", indent, label, type_name(mod), mod.num_parameters());
        for (const auto& [name, t] : mod.params_) out += fmt::format("{}  {} {}\n", indent, name, t.shape().str());
        for (const auto& [name, child] : mod.children_) walk(*child, "(" + name + ") ", indent + "  ");
      };
  walk(m, "", "");
  return out;
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << summary(m); }

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

void Module::collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out) {
  for (const auto& [name, child] : children_) {
    out.emplace_back(prefix + name, child.get());
    child->collect_modules(prefix + name + ".", out);
  }
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  collect_modules("", out);
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

Module& Module::to(DType dtype) {
  if (!is_float(dtype))
    throw std::invalid_argument(fmt::format("Module::to: parameters must be float32 or float64, not {}",
                                            dtype_name(dtype)));
  NoGradGuard ng;
  for (const auto& [name, p] : named_parameters()) {
    if (p.dtype() == dtype) continue;
    const Tensor converted = ops::to_dtype(p, dtype).contiguous();
    // Swap the data under the one TensorImpl every handle to this parameter shares.
    TensorImpl& impl = *p.impl();
    impl.storage = converted.impl()->storage;
    impl.offset = converted.impl()->offset;
    impl.strides = converted.strides();
    impl.dtype = dtype;
    impl.grad.reset();
  }
  return *this;
}

} // namespace headgrad::nn
