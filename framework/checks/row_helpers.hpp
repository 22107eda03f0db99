// row_helpers.hpp - what the *_checks.cpp files build their rows with: float64 inputs from fixed
// seeds shaped for each kind of derivative (kinks, argmax ties, float32 round trips), the row
// builders of the gradient-check table, and the float32 arguments of the misuse rows. Private,
// like registry.hpp.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "framework/checks/registry.hpp"
#include "framework/core/random.hpp"

namespace headgrad::checks {

using Inputs = std::vector<Tensor>;

constexpr DType f64 = DType::f64;
// The groups of the rows that are not ops.hpp's (`headgrad gradcheck --filter` matches them).
constexpr const char* kAttention = "attention";
constexpr const char* kLayers = "layers";
constexpr const char* kModel = "model";

// ---- gradient-check inputs (float64) -----------------------------------------------------------
// N(0, 1).
Tensor randn(const Dims& s, std::uint64_t seed);
// randn with requires_grad set: a leaf a module row checks.
Tensor leaf(const Dims& s, std::uint64_t seed);
// U(0.5, 2): for log, sqrt, pow with fractional/negative exponents, and divisors.
Tensor positive(const Dims& s, std::uint64_t seed);
// N(0, 1) with every |value| >= 0.1: a difference of +-1e-6 never straddles relu's kink at 0
// (nor makes a divisor tiny).
Tensor away_from_zero(const Dims& s, std::uint64_t seed);
// A random permutation of -1.2, -1.1, ... (0.1 apart): every value distinct by far more than
// 2 eps, so max's argmax cannot flip under a perturbation.
Tensor distinct(const Dims& s, std::uint64_t seed);
// Values k/64 with |k| < 256: exactly representable in float32, and so are x +- 2^-10 and the
// product of two such values (< 24 significant bits). See the to_dtype rows.
Tensor grid64(const Dims& s, std::uint64_t seed);
// x with every value moved at least 0.1 away from each of `points` (clamp's bounds), so a
// perturbation never crosses one.
Tensor away_from(const Tensor& x, const std::vector<double>& points);
// int64 indices.
Tensor ints(std::vector<std::int64_t> v, const Dims& s);

// ---- row builders ------------------------------------------------------------------------------
// A row over plain inputs: gradcheck copies them to float64 leaves.
GradcheckCase row(std::string group, std::string name, std::string shapes, std::function<Inputs()> in,
                  GradcheckFn fn);

// A row over a module: checks the inputs and every parameter of the module together.
template <typename MakeModule, typename Forward>
GradcheckCase module_row(std::string group, std::string name, std::string shapes, std::vector<Dims> input_shapes,
                         MakeModule make, Forward forward) {
  GradcheckCase c;
  c.group = std::move(group);
  c.name = std::move(name);
  c.shapes = std::move(shapes);
  c.run = [input_shapes, make, forward](const GradcheckOptions& opt) {
    auto module = make();
    Inputs inputs;
    NamedTensors leaves; // the inputs as "input i", then the parameters by their dotted names
    for (std::size_t i = 0; i < input_shapes.size(); ++i) {
      inputs.push_back(leaf(input_shapes[i], 100 + i));
      leaves.emplace_back(fmt::format("input {}", i), inputs.back());
    }
    for (auto& named : module->named_parameters()) leaves.push_back(named);
    return gradcheck_leaves([&]() { return forward(*module, inputs); }, leaves, opt);
  };
  return c;
}

// ---- misuse-row arguments (float32 unless said) ------------------------------------------------
namespace misuse {
using Args = std::vector<Tensor>;
// The generator the sampling and dropout rows draw from.
Generator& gen();
// N(0, 1) in float32.
Tensor f32(const Dims& shape, std::uint64_t seed = 1);
// A bool mask.
Tensor bools(const std::vector<double>& v, const Dims& shape);
// |N(0, 1)| + 0.5 in float32: for log, sqrt, pow and probabilities.
Tensor positive(const Dims& shape);
} // namespace misuse

} // namespace headgrad::checks
