// layers.hpp - the basic layers: Linear, LayerNorm, Embedding, Dropout, ReLU, GELU, and Sequential.
// Parameter names and shapes match PyTorch's, so a state_dict maps one to one.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "framework/nn/module.hpp"
#include "framework/ops/ops.hpp" // GeluApproximate
#include "framework/core/random.hpp"

namespace headgrad::nn {

// y = x W^T + b; weight (out, in), bias (out). PyTorch's default init: U(-1/sqrt(in), 1/sqrt(in))
// for both (kaiming_uniform with a = sqrt(5) reduces to this bound).
class Linear : public Module {
public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias, Generator& gen, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const; // (..., in) -> (..., out)
  Tensor weight, bias;                   // bias undefined when bias = false
  std::int64_t in_features, out_features;
};

// Normalises the last axis; learned weight (ones) and bias (zeros), eps 1e-5. bias = false: no
// bias parameter (PyTorch's LayerNorm(dim, bias=False), as GPT-style models use it).
class LayerNorm : public Module {
public:
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5, DType dtype = DType::f32, bool bias = true);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias; // bias undefined when bias = false
  double eps;
};

// Rows of weight (num, dim) looked up by int64 tokens; N(0, 1) init as PyTorch.
class Embedding : public Module {
public:
  Embedding(std::int64_t num, std::int64_t dim, Generator& gen, DType dtype = DType::f32);
  Tensor forward(const Tensor& tokens) const; // (...) -> (..., dim)
  Tensor weight;
};

// Inverted dropout, active in training mode only. Owns its generator (seeded) so runs repeat.
// Without a seed, a layer takes the next of one process-wide sequence of seeds, so two layers draw
// independent masks, and a program that builds its layers in the same order draws the same masks
// on every run; seed_dropout(base) restarts the sequence (as torch.manual_seed does PyTorch's one
// generator). The models pass seeds of their own (drawn from the model's generator).
class Dropout : public Module {
public:
  explicit Dropout(double p);
  Dropout(double p, std::uint64_t seed);
  Tensor forward(const Tensor& x);
  // forward returns its input unchanged (evaluation, or p = 0): what follows may fuse across it
  bool is_identity() const { return !training() || p == 0.0; }
  double p;
  Generator gen;
};

// Restarts the sequence of seeds of the Dropout layers built without one: the k-th after it gets
// mix_seed(base, k). A program starts as after seed_dropout(0).
void seed_dropout(std::uint64_t base);

class ReLU : public Module {
public:
  Tensor forward(const Tensor& x) const;
};

// torch.nn.GELU(approximate='none' | 'tanh'): no parameters; the erf form by default, as PyTorch.
class GELU : public Module {
public:
  explicit GELU(ops::GeluApproximate approximate = ops::GeluApproximate::none) : approximate(approximate) {}
  Tensor forward(const Tensor& x) const;
  ops::GeluApproximate approximate;
};

// torch.nn.Sequential: steps applied in order, each a module with a forward(x) (registered as
// child "0", "1", ... in order, so parameter names are PyTorch's: "0.weight", "2.bias") or a
// plain function such as ops::relu, which has no parameters but takes its index all the same, as
// nn.ReLU() would. An empty Sequential returns its input. A Linear followed by a GELU or ReLU
// module runs as one fused op (ops::linear_gelu, ops::linear_relu): the same values, one pass
// over the activations less each way.
//   nn::Sequential mlp(std::make_shared<nn::Linear>(4, 8, true, gen), std::make_shared<nn::GELU>(),
//                      std::make_shared<nn::Linear>(8, 4, true, gen));
class Sequential : public Module {
public:
  using Step = std::function<Tensor(const Tensor&)>;
  Sequential() = default;
  template <typename... Steps> explicit Sequential(Steps&&... steps) { (add(std::forward<Steps>(steps)), ...); }

  // Appends a module (anything with Tensor forward(const Tensor&)); returns it.
  template <typename M> std::shared_ptr<M> add(std::shared_ptr<M> module) {
    if (!module) throw std::invalid_argument("Sequential::add: null module");
    register_module(std::to_string(steps_.size()), module);
    steps_.push_back([m = module.get()](const Tensor& x) { return m->forward(x); });
    Fusable f;
    if constexpr (std::is_same_v<M, Linear>) f.linear = module.get();
    if constexpr (std::is_same_v<M, GELU>) f.gelu = module.get();
    if constexpr (std::is_same_v<M, ReLU>) f.relu = true;
    fusable_.push_back(f);
    return module;
  }
  // Appends a function without parameters.
  void add(Step fn);
  Tensor forward(const Tensor& x) const;
  std::size_t size() const { return steps_.size(); }

private:
  struct Fusable { // what a step is, when it is one of the modules a fused op covers
    const Linear* linear = nullptr;
    const GELU* gelu = nullptr;
    bool relu = false;
  };
  std::vector<Step> steps_;
  std::vector<Fusable> fusable_; // one per step
};

} // namespace headgrad::nn
