#include "framework/checks/differential_calls.hpp"

#include <stdexcept>

namespace headgrad::checks {

DType dtype_named(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "i64") return DType::i64;
  if (s == "bool") return DType::bool8;
  throw std::invalid_argument("op_cases: unknown dtype " + s);
}

Dims dims_of(const json& list) {
  Dims d;
  for (const auto& v : list) d.push_back(v.get<std::int64_t>());
  return d;
}

std::optional<double> optional_number(const json& v) {
  return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
}

Tensor optional_input(const std::vector<Tensor>& x, std::size_t i) { return i < x.size() ? x[i] : Tensor(); }

Outputs values_indices(const ops::ValuesIndices& v) { return {v.values, v.indices}; }

ops::GeluApproximate gelu_form(const json& p) {
  return p["approximate"] == "tanh" ? ops::GeluApproximate::tanh : ops::GeluApproximate::none;
}

ops::AttentionMask mask_of(const std::vector<Tensor>& x, std::size_t first, const json& p) {
  ops::AttentionMask m;
  std::size_t i = first;
  if (p.value("lens", x.size() > first)) m.valid_lens = x[i++];
  m.causal = p.value("causal", false);
  if (p.value("keep", false)) m.keep = x[i];
  return m;
}

} // namespace headgrad::checks
