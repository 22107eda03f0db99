#include "framework/checks/row_helpers.hpp"

#include <algorithm>
#include <cmath>

#include "framework/ops/ops.hpp"

namespace headgrad::checks {

Tensor randn(const Dims& s, std::uint64_t seed) {
  Generator g(seed);
  return Tensor::normal(s, 0.0, 1.0, g, DType::f64);
}

Tensor leaf(const Dims& s, std::uint64_t seed) {
  Tensor t = randn(s, seed);
  t.set_requires_grad(true);
  return t;
}

Tensor positive(const Dims& s, std::uint64_t seed) {
  Generator g(seed);
  return Tensor::uniform(s, 0.5, 2.0, g, DType::f64);
}

Tensor away_from_zero(const Dims& s, std::uint64_t seed) {
  std::vector<double> v = randn(s, seed).to_vector();
  for (double& x : v)
    if (std::abs(x) < 0.1) x = x < 0 ? x - 0.1 : x + 0.1;
  return Tensor::from(v, s, DType::f64);
}

Tensor distinct(const Dims& s, std::uint64_t seed) {
  const std::int64_t n = s.numel();
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = 0.1 * static_cast<double>(i) - 1.2;
  Generator g(seed);
  for (std::int64_t i = n - 1; i > 0; --i) // Fisher-Yates
    std::swap(v[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(g.below(static_cast<std::uint64_t>(i + 1)))]);
  return Tensor::from(v, s, DType::f64);
}

Tensor grid64(const Dims& s, std::uint64_t seed) {
  Generator g(seed);
  std::vector<double> v(static_cast<std::size_t>(s.numel()));
  for (double& x : v) x = (static_cast<double>(g.below(255)) - 127.0) / 64.0;
  return Tensor::from(v, s, DType::f64);
}

Tensor away_from(const Tensor& x, const std::vector<double>& points) {
  std::vector<double> v = x.to_vector();
  for (double& e : v)
    for (double p : points)
      if (std::abs(e - p) < 0.1) e = e < p ? p - 0.1 - (p - e) : p + 0.1 + (e - p);
  return Tensor::from(v, x.shape(), DType::f64);
}

Tensor ints(std::vector<std::int64_t> v, const Dims& s) { return Tensor::from_ints(std::move(v), s); }

GradcheckCase row(std::string group, std::string name, std::string shapes, std::function<Inputs()> in,
                  GradcheckFn fn) {
  GradcheckCase c;
  c.group = std::move(group);
  c.name = std::move(name);
  c.shapes = std::move(shapes);
  c.make_inputs = std::move(in);
  c.fn = std::move(fn);
  return c;
}

namespace misuse {

Generator& gen() {
  static Generator g(7);
  return g;
}

Tensor f32(const Dims& shape, std::uint64_t seed) {
  Generator g(seed);
  return Tensor::normal(shape, 0.0, 1.0, g, DType::f32);
}

Tensor bools(const std::vector<double>& v, const Dims& shape) { return Tensor::from(v, shape, DType::bool8); }

Tensor positive(const Dims& shape) { return ops::add_scalar(ops::abs(f32(shape, 5)), 0.5); }

} // namespace misuse

} // namespace headgrad::checks
