// differential_calls.hpp - how tests/test_differential.cpp replays PyTorch's cases of an op
// (tests/reference/make_op_cases.py): each case names its op ("sigmoid", "pow_scalar",
// "graph_softmax_gram") and stores its inputs, which the test reads through their views, and its
// parameters, a JSON object p. The op's family registers the call that computes the op's outputs
// from them (framework/checks/registry.hpp, CheckFamily::differential_calls), written with the
// helpers below. Private, like registry.hpp.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/checks/registry.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {

using json = nlohmann::json;
using Inputs = std::vector<Tensor>; // (as in row_helpers.hpp)
using Outputs = std::vector<Tensor>;

using DifferentialFn = std::function<Outputs(const Inputs& x, const json& p)>;
struct DifferentialCall {
  std::string op; // the cases' op name, as make_op_cases.py writes it
  DifferentialFn call;
};

// Every registered call by its op name; throws std::logic_error if two families register one name.
std::map<std::string, DifferentialFn> differential_calls();

// The fixture's dtype names: "f32", "f64", "i64", "bool".
DType dtype_named(const std::string& s);
// A JSON list of integers as Dims (axes, a shape, a permutation).
Dims dims_of(const json& list);
// A JSON number, or nullopt for null (clamp's absent bound).
std::optional<double> optional_number(const json& v);
// Input i, or an undefined tensor when the case has fewer inputs (an optional bias, a mask).
Tensor optional_input(const std::vector<Tensor>& x, std::size_t i);
// max_with_indices' and topk's two outputs.
Outputs values_indices(const ops::ValuesIndices& v);
// gelu's form, p["approximate"]: "tanh" or "none" (PyTorch's names).
ops::GeluApproximate gelu_form(const json& p);
// The AttentionMask of inputs x[first...], as make_op_cases.py's keep_of reads them: valid_lens when
// p["lens"] (absent: when there is an input there, the first cases' form), causal when p["causal"],
// then keep when p["keep"].
ops::AttentionMask mask_of(const std::vector<Tensor>& x, std::size_t first, const json& p);

// An op of one tensor: f(x[0]).
template <typename F> DifferentialFn unary_call(F f) {
  return [f](const std::vector<Tensor>& x, const json&) { return Outputs{f(x[0])}; };
}
// An op of two tensors, f(x[0], x[1]); p["twice"] passes x[0] as both (one tensor read twice).
template <typename F> DifferentialFn binary_call(F f) {
  return [f](const std::vector<Tensor>& x, const json& p) {
    return Outputs{p.value("twice", false) ? f(x[0], x[0]) : f(x[0], x[1])};
  };
}
// A comparison: its scalar form with p["s"] when the case has one, else its tensor form.
template <typename F> DifferentialFn compare_call(F tensor_form, Tensor (*scalar_form)(const Tensor&, double)) {
  return [tensor_form, scalar_form](const std::vector<Tensor>& x, const json& p) {
    return Outputs{p.contains("s") ? scalar_form(x[0], p["s"].get<double>()) : tensor_form(x[0], x[1])};
  };
}

} // namespace headgrad::checks
