#include "framework/nn/layers.hpp"

#include <atomic>
#include <cmath>
#include <fmt/format.h>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool with_bias, Generator& gen, DType dtype)
    : in_features(in), out_features(out) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument(fmt::format("Linear: in_features ({}) and out_features ({}) must be positive", in, out));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", Tensor::uniform({out, in}, -bound, bound, gen, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::uniform({out}, -bound, bound, gen, dtype));
}

Tensor Linear::forward(const Tensor& x) const { return ops::linear(x, weight, bias); }

LayerNorm::LayerNorm(std::int64_t dim, double eps_, DType dtype, bool with_bias) : eps(eps_) {
  if (dim <= 0) throw std::invalid_argument(fmt::format("LayerNorm: dim ({}) must be positive", dim));
  weight = register_parameter("weight", Tensor::ones({dim}, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({dim}, dtype));
}

Tensor LayerNorm::forward(const Tensor& x) const { return ops::layer_norm(x, weight, bias, eps); }

Embedding::Embedding(std::int64_t num, std::int64_t dim, Generator& gen, DType dtype) {
  if (num <= 0 || dim <= 0)
    throw std::invalid_argument(fmt::format("Embedding: num ({}) and dim ({}) must be positive", num, dim));
  weight = register_parameter("weight", Tensor::normal({num, dim}, 0.0, 1.0, gen, dtype));
}

Tensor Embedding::forward(const Tensor& tokens) const { return ops::embedding(weight, tokens); }

namespace {
std::atomic<std::uint64_t> g_dropout_base{0}, g_dropout_count{0};
} // namespace

void seed_dropout(std::uint64_t base) {
  g_dropout_base = base;
  g_dropout_count = 0;
}

Dropout::Dropout(double p_) : Dropout(p_, mix_seed(g_dropout_base, g_dropout_count++)) {}

Dropout::Dropout(double p_, std::uint64_t seed) : p(p_), gen(seed) {
  if (!(p >= 0.0 && p < 1.0)) throw std::invalid_argument(fmt::format("Dropout: p = {} is outside [0, 1)", p));
}

Tensor Dropout::forward(const Tensor& x) { return ops::dropout(x, p, training(), gen); }

Tensor ReLU::forward(const Tensor& x) const { return ops::relu(x); }

Tensor GELU::forward(const Tensor& x) const { return ops::gelu(x, approximate); }

void Sequential::add(Step fn) {
  if (!fn) throw std::invalid_argument("Sequential::add: empty function");
  steps_.push_back(std::move(fn));
  fusable_.push_back({});
}

Tensor Sequential::forward(const Tensor& x) const {
  check_defined(x, "Sequential::forward", "x");
  Tensor y = x;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const Linear* lin = fusable_[i].linear;
    const Fusable* next = i + 1 < steps_.size() ? &fusable_[i + 1] : nullptr;
    if (lin && next && next->gelu) { // Linear, GELU: one op
      y = ops::linear_gelu(y, lin->weight, lin->bias, next->gelu->approximate);
      ++i;
    } else if (lin && next && next->relu) { // Linear, ReLU: one op
      y = ops::linear_relu(y, lin->weight, lin->bias);
      ++i;
    } else {
      y = steps_[i](y);
    }
  }
  return y;
}

} // namespace headgrad::nn
