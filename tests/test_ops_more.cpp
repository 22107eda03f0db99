// Forward values of the ops that follow PyTorch's API beyond the model's needs (softmax along any
// axis, min/max with indices, argmax, topk, abs, sigmoid, clamp, where, masked_fill, comparisons,
// var/std, logsumexp, expand/squeeze/unsqueeze/stack/split/chunk, stepped slices, pow with a
// tensor exponent, cross_entropy's options, layer_norm without affine parameters, dtype promotion)
// on small hand-computed examples, and their error messages. Gradients: the gradcheck table;
// agreement with PyTorch at large: tests/test_differential.cpp.
#include <doctest/doctest.h>

#include <cmath>

#include "framework/core/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/promotion.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::contains;
using test_support::error_of;
using test_support::kInf;
using test_support::kNaN;

namespace {

using V = std::vector<double>;
using I64 = std::vector<std::int64_t>;

Tensor T(const V& v, const Dims& s, DType d = DType::f64) { return Tensor::from(v, s, d); }
Tensor B(const V& v, const Dims& s) { return Tensor::from(v, s, DType::bool8); }

void check_values(const Tensor& t, const Dims& shape, const V& want, double tol = 1e-12) {
  CHECK(t.shape() == shape);
  check_close(t, want, tol);
}

template <typename F> std::string invalid_arg(F&& f) { return error_of<std::invalid_argument>(f); }

} // namespace

TEST_CASE("softmax and log_softmax along any axis equal the last-axis op on the moved axis") {
  const Tensor x = test_support::randn({2, 3, 4}, 1);
  for (int axis : {0, 1, -2}) {
    const Tensor moved = ops::transpose(x, axis, -1);
    check_close(ops::softmax(x, axis), ops::transpose(ops::softmax(moved), axis, -1).to_vector(), 1e-15);
    check_close(ops::log_softmax(x, axis), ops::transpose(ops::log_softmax(moved), axis, -1).to_vector(), 1e-14);
  }
  check_close(ops::softmax(x, 2), ops::softmax(x).to_vector(), 0);
  check_values(ops::softmax(T({0, std::log(3.0)}, {2, 1}), 0), {2, 1}, {0.25, 0.75});
  CHECK(invalid_arg([] { ops::softmax(Tensor::zeros({2}), 1); }) ==
        "softmax: axis 1 is out of range for a tensor of rank 1");
}

TEST_CASE("logsumexp over axes, with PyTorch's infinities") {
  const Tensor x = T({0, std::log(3.0), -kInf, -kInf, kInf, 1}, {3, 2});
  const V r = ops::logsumexp(x, {1}).to_vector();
  CHECK(r[0] == doctest::Approx(std::log(4.0)).epsilon(1e-15));
  CHECK(r[1] == -kInf);
  CHECK(r[2] == kInf);
  check_values(ops::logsumexp(T({1, 2, 3, 4}, {2, 2}), {0, 1}, true), {1, 1},
               {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0))});
  check_values(ops::logsumexp(T({1, 2, 3, 4}, {2, 2}), {0}), {2},
               {std::log(std::exp(1.0) + std::exp(3.0)), std::log(std::exp(2.0) + std::exp(4.0))});
  CHECK(invalid_arg([] { ops::logsumexp(Tensor::zeros({2, 2}), {1, -1}); }) == "logsumexp: axes [1, -1] repeat axis 1");
}

TEST_CASE("max, min, argmax, argmin and topk") {
  const Tensor x = T({3, 1, 3, 2, 5, 5}, {2, 3});
  const ops::ValuesIndices mx = ops::max_with_indices(x, 1);
  check_values(mx.values, {2}, {3, 5});
  CHECK(mx.indices.to_int_vector() == I64{0, 1}); // ties: the first index
  const ops::ValuesIndices mn = ops::min_with_indices(x, 0, true);
  check_values(mn.values, {1, 3}, {2, 1, 3});
  CHECK(mn.indices.to_int_vector() == I64{1, 0, 0});
  check_values(ops::min(x, -1), {2}, {1, 2});
  CHECK(ops::argmax(x, 1).to_int_vector() == I64{0, 1});
  CHECK(ops::argmin(x, 0, true).shape() == Dims{1, 3});
  CHECK(ops::argmax(x).item() == 4); // flat index over all elements
  CHECK(ops::argmin(x).item() == 1);
  CHECK(ops::argmax(Tensor::from_ints({4, 9, 9}, {3}), 0).item() == 1); // any dtype
  // a 0-d tensor reduces to itself along axis 0 or -1
  CHECK(ops::max(Tensor::scalar(2.5, DType::f64), -1).item() == 2.5);

  const Tensor y = T({1, kNaN, 3, 3, 2}, {5});
  const ops::ValuesIndices top = ops::topk(y, 3);
  CHECK(std::isnan(top.values.to_vector()[0]));
  CHECK(top.indices.to_int_vector() == I64{1, 2, 3}); // NaN first, ties by index
  const ops::ValuesIndices low = ops::topk(y, 3, 0, false);
  check_values(low.values, {3}, {1, 2, 3});
  CHECK(low.indices.to_int_vector() == I64{0, 4, 2});
  const ops::ValuesIndices cols = ops::topk(T({1, 6, 5, 2, 3, 4}, {3, 2}), 2, 0);
  check_values(cols.values, {2, 2}, {5, 6, 3, 4});
  CHECK(cols.indices.to_int_vector() == I64{1, 0, 2, 2});
  CHECK(ops::topk(y, 0).values.shape() == Dims{0});

  CHECK(invalid_arg([&] { ops::topk(y, 6); }) == "topk: k = 6 is outside [0, 5] for axis 0 of shape [5]");
  CHECK(invalid_arg([] { ops::min(Tensor::zeros({2, 0}), 1); }) == "min: axis 1 of shape [2, 0] is empty");
  CHECK(invalid_arg([] { ops::argmax(Tensor::zeros({0})); }) == "argmax: axis 0 of shape [0] is empty");
}

TEST_CASE("abs, sigmoid, clamp") {
  check_values(ops::abs(T({-2, 0, 3}, {3})), {3}, {2, 0, 3});
  check_values(ops::sigmoid(T({0, std::log(3.0)}, {2})), {2}, {0.5, 0.75});
  CHECK(ops::sigmoid(T({-1000}, {1})).item() == 0);
  const V c = ops::clamp(T({-2, 0.5, 3, kNaN}, {4}), -1.0, 1.0).to_vector();
  CHECK(c[0] == -1);
  CHECK(c[1] == 0.5);
  CHECK(c[2] == 1);
  CHECK(std::isnan(c[3]));
  check_values(ops::clamp(T({-2, 3}, {2}), 0.0, std::nullopt), {2}, {0, 3});
  check_values(ops::clamp(T({-2, 3}, {2}), std::nullopt, 0.0), {2}, {-2, 0});
  check_values(ops::clamp(T({0.5, 3}, {2}), 2.0, 1.0), {2}, {1, 1}); // max wins when min > max
  // the refusals (clamp with neither bound) are registered beside the op: framework/checks/ops/unary_checks.cpp
}

TEST_CASE("where, masked_fill and comparisons") {
  const Tensor a = T({1, 2, 3, 4, 5, 6}, {2, 3}), b = T({-1, -2, -3}, {3});
  check_values(ops::where(B({1, 0}, {2, 1}), a, b), {2, 3}, {1, 2, 3, -1, -2, -3});
  check_values(ops::where(B({0, 1, 0}, {3}), a, Tensor::from_ints({7, 8, 9}, {3})), {2, 3}, {7, 2, 9, 7, 5, 9});
  check_values(ops::masked_fill(a, B({1, 0, 1}, {3}), -9), {2, 3}, {-9, 2, -9, -9, 5, -9});
  CHECK(invalid_arg([&] { ops::where(Tensor::zeros({3}), a, b); }) ==
        "where: the mask must be bool, got float32 of shape [3] (input [2, 3])");
  CHECK(invalid_arg([&] { ops::masked_fill(b, B({1, 0, 1, 1, 0, 1}, {2, 3}), 0); }) ==
        "masked_fill: mask [2, 3] does not broadcast to the input's shape [3]");

  const Tensor x = T({1, kNaN, 3}, {3});
  CHECK(ops::eq(x, T({1, kNaN, 2}, {3})).to_int_vector() == I64{1, 0, 0}); // NaN != NaN
  CHECK(ops::ne(x, T({1, kNaN, 2}, {3})).to_int_vector() == I64{0, 1, 1});
  CHECK(ops::lt(x, 2.0).to_int_vector() == I64{1, 0, 0});
  CHECK(ops::le(x, 3.0).to_int_vector() == I64{1, 0, 1});
  CHECK(ops::gt(T({1, 2}, {2, 1}), T({0, 1, 2}, {3})).to_int_vector() == I64{1, 0, 0, 1, 1, 0});
  CHECK(ops::ge(Tensor::from_ints({1, 2, 3}, {3}), 2.0).to_int_vector() == I64{0, 1, 1});
  CHECK(ops::eq(x, 1.0).dtype() == DType::bool8);
  // promotion: float32 0.1 against float64 0.1 compares in float64 (they differ), the scalar
  // form rounds the scalar to the tensor's float32 (they agree)
  const Tensor f32 = Tensor::from({0.1}, {1}, DType::f32);
  CHECK(ops::eq(f32, Tensor::from({0.1}, {1}, DType::f64)).item() == 0);
  CHECK(ops::eq(f32, 0.1).item() == 1);
  CHECK(ops::logical_and(B({1, 1, 0}, {3}), B({1, 0, 0}, {3})).to_int_vector() == I64{1, 0, 0});
  CHECK(ops::logical_or(B({1, 1, 0}, {3}), T({0, 0, kNaN}, {3})).to_int_vector() == I64{1, 1, 1});
  CHECK(ops::logical_not(Tensor::from_ints({0, 5}, {2})).to_int_vector() == I64{1, 0});
  CHECK(invalid_arg([&] { ops::eq(a, T({1, 2}, {2})); }) == "eq: shapes [2, 3] and [2] cannot be broadcast");
}

TEST_CASE("dtype promotion: an int64 or bool operand joins a float one, other mixes are refused") {
  const Tensor f = T({0.5, 1.5}, {2}, DType::f32);
  Tensor s = ops::add(f, Tensor::from_ints({1, 2}, {2}));
  CHECK(s.dtype() == DType::f32);
  check_close(s, {1.5, 3.5}, 0);
  check_close(ops::mul(B({1, 0}, {2}), f), {0.5, 0}, 0);
  check_close(ops::div(Tensor::from_ints({3}, {}), T({2, 4}, {2})), {1.5, 0.75}, 0);
  // the float operand's gradient is the usual one; the integer operand gets none
  Tensor g = T({2, 3}, {2});
  g.set_requires_grad(true);
  ops::sum(ops::mul(g, Tensor::from_ints({4, 5}, {2}))).backward();
  check_close(g.grad(), {4, 5}, 0);
  CHECK(ops::result_type(Tensor::from_ints({1}, {1}), Tensor::scalar(1.0, DType::f64)) == DType::f64);
  CHECK(ops::result_type(Tensor::zeros({2}), Tensor::scalar(1.0, DType::f64)) == DType::f32); // dims win in-category
  CHECK(ops::result_type(B({1}, {1}), Tensor::from_ints({1}, {})) == DType::i64);
  CHECK(ops::result_type(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)) == DType::f64);
  CHECK(invalid_arg([&] { ops::add(Tensor::from_ints({1}, {1}), B({1}, {1})); }) ==
        "add: no float operand: [1] int64 and [1] bool (integer arithmetic is not supported; convert one with "
        "to_dtype)");
  CHECK(invalid_arg([&] { ops::sub(f, T({1, 2}, {2})); }) == "sub: dtypes differ: [2] float32 and [2] float64");
}

TEST_CASE("pow with a tensor exponent") {
  check_values(ops::pow(T({2, 9, -2}, {3}), T({3, 0.5, 2}, {3})), {3}, {8, 3, 4});
  check_values(ops::pow(T({2, 3}, {2, 1}), Tensor::from_ints({0, 1, 2}, {3})), {2, 3}, {1, 2, 4, 1, 3, 9});
  CHECK(std::isnan(ops::pow(T({-2}, {1}), T({0.5}, {1})).item()));
}

TEST_CASE("var and std") {
  const Tensor x = T({1, 2, 4, 2, 2, 2}, {2, 3});
  check_values(ops::var(x, {1}), {2}, {7.0 / 3, 0});
  check_values(ops::var(x, {1}, 0), {2}, {14.0 / 9, 0});
  check_values(ops::std(x, {1}, 1, true), {2, 1}, {std::sqrt(7.0 / 3), 0}, 1e-15);
  check_close(ops::var(x), {std::pow(1 - 13.0 / 6, 2) / 5 + 4 * std::pow(2 - 13.0 / 6, 2) / 5 + std::pow(4 - 13.0 / 6, 2) / 5},
              1e-14);
  CHECK(std::isnan(ops::var(T({3}, {1})).item())); // N - correction = 0: 0 / 0, as PyTorch
  CHECK(contains(invalid_arg([] { ops::var(Tensor::zeros({2, 0}), {1}); }), "var: needs a float tensor and a non-empty"));
}

TEST_CASE("expand, squeeze, unsqueeze are views") {
  const Tensor x = T({1, 2, 3}, {3, 1});
  const Tensor e = ops::expand(x, {2, 3, 2});
  check_values(e, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(e.raw() == x.raw());
  check_values(ops::expand(x, {-1, 4}), {3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  CHECK(invalid_arg([&] { ops::expand(x, {2, 2}); }) == "expand: the input [3, 1] cannot be expanded to [2, 2] (axis 0: 3 -> 2)");
  CHECK(invalid_arg([&] { ops::expand(x, {3}); }) == "expand: shape [3] has fewer axes than the input [3, 1]");
  CHECK(ops::squeeze(Tensor::zeros({1, 3, 1, 2})).shape() == Dims{3, 2});
  CHECK(ops::squeeze(Tensor::zeros({1, 3, 1}), -1).shape() == Dims{1, 3});
  CHECK(ops::squeeze(Tensor::zeros({2, 3}), 0).shape() == Dims{2, 3}); // not size 1: unchanged
  const Tensor u = ops::unsqueeze(ops::transpose(T({1, 2, 3, 4, 5, 6}, {2, 3}), 0, 1), 1);
  check_values(u, {3, 1, 2}, {1, 4, 2, 5, 3, 6});
  CHECK(ops::unsqueeze(x, 2).shape() == Dims{3, 1, 1});
  CHECK(ops::unsqueeze(x, -3).shape() == Dims{1, 3, 1});
  CHECK(invalid_arg([&] { ops::unsqueeze(x, 3); }) == "unsqueeze: axis 3 is outside [-3, 2] for a tensor of shape [3, 1]");
}

TEST_CASE("stack, split and chunk follow torch") {
  const Tensor a = T({1, 2}, {2}), b = T({3, 4}, {2});
  check_values(ops::stack({a, b}, 0), {2, 2}, {1, 2, 3, 4});
  check_values(ops::stack({a, b}, -1), {2, 2}, {1, 3, 2, 4});
  CHECK(invalid_arg([&] { ops::stack({a, T({1}, {1})}, 0); }) == "stack: shapes [2] and [1] differ");
  const Tensor x = Tensor::arange(5, DType::f64);
  auto sizes = [](const std::vector<Tensor>& parts) {
    I64 s;
    for (const auto& p : parts) s.push_back(p.shape()[0]);
    return s;
  };
  CHECK(sizes(ops::split(x, 2)) == I64{2, 2, 1});
  CHECK(sizes(ops::split(x, I64{1, 0, 4})) == I64{1, 0, 4});
  check_values(ops::split(x, I64{1, 0, 4})[2], {4}, {1, 2, 3, 4});
  CHECK(sizes(ops::split(Tensor::zeros({0}), 2)) == I64{0});
  CHECK(sizes(ops::chunk(x, 3)) == I64{2, 2, 1});
  CHECK(sizes(ops::chunk(Tensor::arange(6), 4)) == I64{2, 2, 2}); // fewer pieces than asked
  CHECK(sizes(ops::chunk(Tensor::zeros({0}), 3)) == I64{0, 0, 0});
  CHECK(invalid_arg([&] { ops::split(x, I64{2, 2}); }) == "split: sizes [2, 2] do not add up to axis 0 of shape [5]");
  CHECK(invalid_arg([&] { ops::split(x, 0); }) == "split: size 0 must be positive (axis 0 of shape [5])");
  CHECK(invalid_arg([&] { ops::chunk(x, 0); }) == "chunk: chunks = 0 must be positive (shape [5])");
}

TEST_CASE("slice with a step and negative bounds, Python's rules") {
  const Tensor x = Tensor::arange(7, DType::f64);
  check_values(ops::slice(x, 0, -6, -1, 2), {3}, {1, 3, 5});
  check_values(ops::slice(x, 0, 1, 100, 3), {2}, {1, 4});
  check_values(ops::slice(x, 0, -100, 2, 1), {2}, {0, 1});
  check_values(ops::slice(x, 0, 5, 2, 1), {0}, {});
  const Tensor m = T({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(ops::slice(ops::transpose(m, 0, 1), 0, 0, 3, 2), {2, 2}, {1, 4, 3, 6});
  CHECK(invalid_arg([&] { ops::slice(x, 0, 0, 3, 0); }) == "slice: step 0 must be positive (axis 0 of shape [7])");
}

TEST_CASE("cross_entropy reduction and ignore_index") {
  const Tensor x = T({2, 0, 0, 0, 1, 0, 1, 1, 3}, {3, 3});
  const double l0 = std::log(std::exp(2.0) + 2) - 2, l2 = std::log(2 * std::exp(1.0) + std::exp(3.0)) - 1;
  ops::CrossEntropyOptions o;
  o.reduction = ops::Reduction::none;
  const Tensor t = Tensor::from_ints({0, -100, 1}, {3});
  check_values(ops::cross_entropy(x, t, o), {3}, {l0, 0, l2}, 1e-15);
  o.reduction = ops::Reduction::sum;
  CHECK(ops::cross_entropy(x, t, o).item() == doctest::Approx(l0 + l2).epsilon(1e-15));
  o.reduction = ops::Reduction::mean;
  CHECK(ops::cross_entropy(x, t, o).item() == doctest::Approx((l0 + l2) / 2).epsilon(1e-15));
  o.mask = T({3, 1, 1}, {3});
  CHECK(ops::cross_entropy(x, t, o).item() == doctest::Approx((3 * l0 + l2) / 4).epsilon(1e-15));
  // without ignore_index, -100 is a target outside the classes
  CHECK(contains(invalid_arg([&] { ops::cross_entropy(x, t); }), "target -100 at position 1 is outside [0, 3)"));
  o.ignore_index = std::nullopt;
  CHECK(contains(invalid_arg([&] { ops::cross_entropy(x, t, o); }), "target -100"));
}

TEST_CASE("layer_norm without affine parameters normalises each row") {
  const Tensor x = T({1, 2, 3, 4, 4, 4}, {2, 3});
  const double r = 1 / std::sqrt(2.0 / 3 + 1e-5);
  check_values(ops::layer_norm(x, Tensor(), Tensor()), {2, 3}, {-r, 0, r, 0, 0, 0}, 1e-12);
  check_values(ops::layer_norm(x, T({2, 2, 2}, {3}), Tensor()), {2, 3}, {-2 * r, 0, 2 * r, 0, 0, 0}, 1e-12);
  check_values(ops::layer_norm(x, Tensor(), T({1, 1, 1}, {3})), {2, 3}, {1 - r, 1, 1 + r, 1, 1, 1}, 1e-12);
}
