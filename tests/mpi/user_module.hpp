// user_module.hpp - a module of a user's own (not the reference model) for the data-parallel
// wrapper's test: a two-layer perceptron on a regression batch, float64. Shared by the MPI rank
// program (rank_program.cpp) and tests/test_mpi.cpp, which computes the single-process gradients.
#pragma once
#include <memory>

#include "framework/nn/layers.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"

namespace user_module {

using namespace headgrad;

class TwoLayerNet : public nn::Module {
public:
  explicit TwoLayerNet(std::uint64_t seed) {
    Generator gen(seed);
    hidden = register_module("hidden", std::make_shared<nn::Linear>(4, 6, true, gen, DType::f64));
    out = register_module("out", std::make_shared<nn::Linear>(6, 3, true, gen, DType::f64));
  }
  Tensor forward(const Tensor& x) const { return out->forward(ops::tanh(hidden->forward(x))); }
  std::shared_ptr<nn::Linear> hidden, out;
};

// The global batch, the same on every rank: inputs (rows, 4) and targets (rows, 3).
struct Rows {
  Tensor x, y;
};
inline Rows global_batch(std::int64_t rows) {
  Generator gen(7);
  return {Tensor::normal({rows, 4}, 0, 1, gen, DType::f64), Tensor::normal({rows, 3}, 0, 1, gen, DType::f64)};
}

// Rows [first, first + count) of the batch's squared error, over the whole batch's element count:
// the shards' losses add up to the batch's mean squared error.
inline Tensor shard_loss(const TwoLayerNet& net, const Rows& batch, std::int64_t first, std::int64_t count) {
  const Tensor x = batch.x.slice(0, first, first + count), y = batch.y.slice(0, first, first + count);
  const Tensor err = ops::sub(net.forward(x), y);
  return ops::mul_scalar(ops::sum(ops::mul(err, err)), 1.0 / static_cast<double>(batch.y.numel()));
}

} // namespace user_module
