// module.hpp - the Module base: parameters by dotted name (like a PyTorch state_dict), in
// registration order (own parameters first, then children in order), train/eval, zero_grad.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad::nn {

using headgrad::NamedTensors; // framework/core/tensor.hpp

class Module {
public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  NamedTensors named_parameters() const; // "W_q.weight", "blks.0.ffn.dense1.bias", ...
  // Every registered submodule at any depth by dotted name ("blks.0.addnorm1.dropout"), depth
  // first in registration order, this module itself not included (PyTorch's named_modules
  // without the root).
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<Tensor> parameters() const;
  std::int64_t num_parameters() const;   // total element count

  void train(bool on = true);            // this module and every child
  void eval() { train(false); }
  bool training() const { return training_; }
  void zero_grad();

  // Converts every parameter to the float dtype `dtype` in place, as PyTorch's Module.to(dtype):
  // the handles the module (and anyone else) holds stay valid and see the new dtype and values;
  // gradients are dropped. What it is for: gradchecking a float32 module in float64 without
  // rebuilding it. Build optimizers after it (their state keeps the old dtype), and note that
  // parameters shared with a replica (distributed::share_parameters) stop sharing. Returns *this.
  Module& to(DType dtype);

protected:
  // Registers a parameter (a leaf that requires grad) and returns the same handle.
  Tensor register_parameter(std::string name, Tensor value);
  template <typename M> std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> m) {
    children_.emplace_back(std::move(name), m);
    return m;
  }

private:
  void collect(const std::string& prefix, NamedTensors& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out);
  NamedTensors params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

} // namespace headgrad::nn
