// module.hpp - the Module base: parameters by dotted name (like a PyTorch state_dict), in
// registration order (own parameters first, then children in order), train/eval, zero_grad.
#pragma once
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad::nn {

using headgrad::NamedTensors; // framework/core/tensor.hpp

// What takes parameters (an optimizer, a replica's sharing) takes either a module's
// named_parameters() or its parameters(); plain tensors are named by position ("0", "1", ..., as
// torch.optim's state_dict numbers them).
struct ParameterList : NamedTensors {
  using NamedTensors::NamedTensors;
  ParameterList(NamedTensors named) : NamedTensors(std::move(named)) {}
  ParameterList(const std::vector<Tensor>& plain);
};

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

  // PyTorch's print(model): the tree of registered modules, each by its name and type with the
  // parameters in it (summed over its children), its own parameters with their shapes:
  //   ResidualMLP: 76 parameters
  //     gain [4]
  //     (norm) LayerNorm: 8 parameters
  //       weight [4]
  //   ...
  friend std::string summary(const Module& m);

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

std::string summary(const Module& m);
std::ostream& operator<<(std::ostream& os, const Module& m); // summary(m)

} // namespace headgrad::nn
