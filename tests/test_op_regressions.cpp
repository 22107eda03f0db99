// Regression tests for op semantics that disagreed with PyTorch 1.13 (each named after what was
// wrong), and for the documented differences that remain: each pins the PyTorch value, worked
// out by hand here, or the documented deviation.
#include <doctest/doctest.h>

#include <cmath>

#include "framework/core/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace test_support; // check_close, check_same, contains, error_of, kInf, kNaN, leaf

namespace {

using V = std::vector<double>;

// log(sum exp(row)) - row[t]: one position's cross-entropy.
double ce_row(const V& row, int t) {
  double s = 0;
  for (double v : row) s += std::exp(v);
  return std::log(s) - row[static_cast<std::size_t>(t)];
}

} // namespace

TEST_CASE("linear with in_features 0 returns the bias in every row and db sums dy") {
  for (DType d : {DType::f32, DType::f64}) {
    Tensor x = leaf({}, {3, 0}, d), W = leaf({}, {4, 0}, d), b = leaf({1, 2, 3, 4}, {4}, d);
    Tensor y = ops::linear(x, W, b);
    CHECK(y.shape() == Dims{3, 4});
    check_same(y, {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}); // was uninitialised memory (up to 1e15)
    y.backward(Tensor::ones({3, 4}, d));
    check_same(b.grad(), {3, 3, 3, 3}); // was 0
    CHECK(x.grad().shape() == Dims{3, 0});
    CHECK(W.grad().shape() == Dims{4, 0});
    check_same(ops::linear(Tensor::zeros({2, 0}, d), Tensor::zeros({3, 0}, d)), V(6, 0.0)); // no bias: zeros
  }
  // matmul with an empty inner dimension is the empty sum too
  check_same(ops::matmul(Tensor::zeros({2, 0}, DType::f64), Tensor::zeros({0, 3}, DType::f64)), V(6, 0.0));
}

TEST_CASE("matmul with an expanded right operand gives every batch element its own gradient") {
  // B (1, 2, 2) expanded to (3, 2, 2): one matrix in memory, but the expand's input receives the
  // sum over the batch. The batch used to fold into one gemm whose dB covered batch 0 only.
  Tensor a = leaf(test_support::randn({3, 2, 2}, 2).to_vector(), {3, 2, 2});
  Tensor b = leaf({1, 2, 3, 4}, {1, 2, 2});
  ops::sum(ops::matmul(a, ops::expand(b, {3, 2, 2}))).backward();
  // d/dB sum(A B) = sum over batch and rows of A: column sums of A^T 1
  const V av = a.to_vector();
  V want(4, 0.0);
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 2; ++k) {
        want[static_cast<std::size_t>(k * 2)] += av[static_cast<std::size_t>(t * 4 + i * 2 + k)];
        want[static_cast<std::size_t>(k * 2 + 1)] += av[static_cast<std::size_t>(t * 4 + i * 2 + k)];
      }
  check_close(b.grad(), want, 1e-14);
}

TEST_CASE("max and min along an axis report a NaN wherever it is and give it the gradient") {
  Tensor x = leaf({1, kNaN, 3, kNaN, 1, 2}, {2, 3});
  Tensor y = ops::max(x, 1); // was [3, nan]: a NaN after the first element was skipped
  check_same(y, {kNaN, kNaN});
  y.backward(Tensor::ones({2}, DType::f64));
  check_same(x.grad(), {0, 1, 0, 1, 0, 0});
  const ops::ValuesIndices m = ops::min_with_indices(x.detach(), 1);
  check_same(m.values, {kNaN, kNaN});
  CHECK(m.indices.to_int_vector() == std::vector<std::int64_t>{1, 0});
  CHECK(ops::argmax(Tensor::from({1, 3, kNaN, kNaN}, {4}, DType::f32), 0).item() == 2); // the first NaN
}

TEST_CASE("cross_entropy with no classes and nothing counted reads no logits") {
  for (DType d : {DType::f32, DType::f64}) {
    Tensor logits = leaf({}, {2, 0}, d); // under ASan this read out of bounds at the row max
    Tensor loss = ops::cross_entropy(logits, Tensor::from_ints({0, 0}, {2}), Tensor::zeros({2}, DType::bool8));
    CHECK(loss.item() == 0);
    loss.backward();
    CHECK(logits.grad().shape() == Dims{2, 0});
  }
  // a counted position still needs a valid class
  CHECK(contains(error_of<std::invalid_argument>([] {
                   ops::cross_entropy(Tensor::zeros({2, 0}), Tensor::from_ints({0, 0}, {2}));
                 }),
                 "outside [0, 0)"));
}

TEST_CASE("cross_entropy float mask is a per-position weight and an integer mask counts") {
  const V x = {2, 0, 0, 0, 1, 0};
  const double l0 = ce_row({2, 0, 0}, 0), l1 = ce_row({0, 1, 0}, 1);
  const Tensor t = Tensor::from_ints({0, 1}, {2});
  // weights 0.5 and 1: (0.5 l0 + l1) / 1.5 (was 0.5514 = l1 alone: the 0.5 was truncated to 0)
  Tensor logits = leaf(x, {2, 3});
  Tensor loss = ops::cross_entropy(logits, t, Tensor::from({0.5, 1}, {2}, DType::f64));
  CHECK(loss.item() == doctest::Approx((0.5 * l0 + l1) / 1.5).epsilon(1e-14));
  loss.backward();
  // dL/dx_r = w_r (softmax(x_r) - onehot(t_r)) / sum(w)
  const double e2 = std::exp(2.0), e1 = std::exp(1.0);
  const V p0 = {e2 / (e2 + 2), 1 / (e2 + 2), 1 / (e2 + 2)}, p1 = {1 / (e1 + 2), e1 / (e1 + 2), 1 / (e1 + 2)};
  check_close(logits.grad(), {0.5 * (p0[0] - 1) / 1.5, 0.5 * p0[1] / 1.5, 0.5 * p0[2] / 1.5, p1[0] / 1.5,
                              (p1[1] - 1) / 1.5, p1[2] / 1.5},
              1e-15);
  // int64 and bool masks count their nonzero positions: both rows, plain mean = 0.3955
  const double both = (l0 + l1) / 2;
  CHECK(both == doctest::Approx(0.3955).epsilon(1e-4));
  CHECK(ops::cross_entropy(Tensor::from(x, {2, 3}, DType::f64), t, Tensor::from_ints({2, 1}, {2})).item() ==
        doctest::Approx(both).epsilon(1e-14));
  CHECK(ops::cross_entropy(Tensor::from(x, {2, 3}, DType::f64), t, Tensor::from({1, 1}, {2}, DType::bool8)).item() ==
        doctest::Approx(both).epsilon(1e-14));
  // a negative or non-finite weight is refused, naming the position
  CHECK(contains(error_of<std::invalid_argument>([&] {
                   ops::cross_entropy(Tensor::from(x, {2, 3}, DType::f64), t, Tensor::from({1, -1}, {2}, DType::f64));
                 }),
                 "position 1"));
}

TEST_CASE("div's gradient for the divisor does not overflow or lose subnormal precision") {
  // float32 a = 1e30, b = 1e20: d(a/b)/db = -a / b^2 = -1e-10 (b * b overflowed to inf: it was 0)
  Tensor a = leaf({1e30}, {1}, DType::f32), b = leaf({1e20}, {1}, DType::f32);
  ops::div(a, b).backward(Tensor::ones({1}, DType::f32));
  check_close(b.grad(), {-1e-10}, 0, 1e-6);
  // a = 1e-30, b = 1e-22: -1e14 (b * b = 1e-44 is subnormal in float32: it was 2% off)
  Tensor c = leaf({1e-30}, {1}, DType::f32), e = leaf({1e-22}, {1}, DType::f32);
  ops::div(c, e).backward(Tensor::ones({1}, DType::f32));
  check_close(e.grad(), {-1e14}, 0, 1e-6);
  // rdiv_scalar uses the same form: d(s/x)/dx = -(y / x)
  Tensor f = leaf({1e20}, {1}, DType::f32);
  ops::rdiv_scalar(f, 1e30).backward(Tensor::ones({1}, DType::f32));
  check_close(f.grad(), {-1e-10}, 0, 1e-6);
}

TEST_CASE("mean over a kept empty axis is empty and over an empty reduced axis still throws") {
  Tensor x = leaf({}, {0, 3});
  Tensor m = ops::mean(x, {1}); // was "reducing an empty tensor": the count was 0 / 0
  CHECK(m.shape() == Dims{0});
  ops::sum(m).backward();
  CHECK(x.grad().shape() == Dims{0, 3});
  CHECK(ops::mean(x, {1}, true).shape() == Dims{0, 1});
  CHECK(ops::mean(Tensor::zeros({0, 0}, DType::f64), {1}).shape() == Dims{0});
  // documented difference: PyTorch gives NaN for a mean over nothing, we refuse
  CHECK(error_of<std::invalid_argument>([] { ops::mean(Tensor::zeros({3, 0}, DType::f64), {1}); }) ==
        "mean: reducing an empty tensor of shape [3, 0]");
  CHECK(contains(error_of<std::invalid_argument>([] { ops::mean(Tensor::zeros({0}, DType::f64)); }), "empty"));
}

TEST_CASE("relu passes the gradient on at NaN") {
  Tensor x = leaf({kNaN, -1, 0, 2}, {4});
  Tensor y = ops::relu(x);
  check_same(y, {kNaN, 0, 0, 2});
  y.backward(Tensor::from({5, 5, 5, 5}, {4}, DType::f64));
  check_same(x.grad(), {5, 0, 0, 5}); // was 0 at NaN
}

TEST_CASE("sum of a bool or int64 tensor is an int64 count") {
  const Tensor b = Tensor::from({1, 0, 1, 1, 1, 0}, {2, 3}, DType::bool8);
  Tensor s = ops::sum(b); // threw an error naming sum_to
  CHECK(s.dtype() == DType::i64);
  CHECK(s.item() == 4);
  CHECK(ops::sum(b, {1}).to_int_vector() == std::vector<std::int64_t>{2, 2});
  CHECK(ops::sum(Tensor::from_ints({3, -1, 4}, {3}), {0}, true).to_int_vector() == std::vector<std::int64_t>{6});
  CHECK(contains(error_of<std::invalid_argument>([&] { ops::mean(b); }), "mean: expected a float32 or float64"));
}

TEST_CASE("view of a non-contiguous tensor that needs no copy") {
  // (2, 3, 1, 1) with strides (12, 4, 4, 1): every fourth element of a (2, 12) tensor
  Tensor base = leaf(test_support::randn({2, 12}, 1).to_vector(), {2, 12});
  Tensor x = make_view(base.detach(), {2, 3, 1, 1}, {12, 4, 4, 1}, 0);
  CHECK_FALSE(x.is_contiguous());
  Tensor v = x.view({2, 1, 3, 1}); // refused before, against its own header
  CHECK(v.raw() == x.raw());
  CHECK(v.to_vector() == x.to_vector());
  // the same through autograd, with the gradient landing on the strided positions
  Tensor g = ops::view(ops::reshape(ops::slice(base, 1, 0, 12, 4), {2, 3, 1, 1}), {2, 1, 3, 1});
  g.backward(Tensor::ones({2, 1, 3, 1}, DType::f64));
  V want(24, 0.0);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 12; c += 4) want[static_cast<std::size_t>(r * 12 + c)] = 1;
  check_same(base.grad(), want);
  // a layout no strides fit still throws
  CHECK(contains(error_of<std::invalid_argument>([&] { base.transpose(0, 1).view({24}); }),
                 "view: tensor of shape [12, 2]"));
}

TEST_CASE("empty tensors are contiguous whatever their strides") {
  const Tensor x = Tensor::zeros({2, 5}, DType::f64);
  CHECK(ops::slice(x, 1, 2, 2).is_contiguous()); // (2, 0) with strides (5, 1)
  CHECK(ops::transpose(ops::slice(x, 0, 1, 1), 0, 1).is_contiguous());
}

TEST_CASE("documented difference: softmax of an all -inf row is zeros with zero gradient") {
  Tensor x = leaf({-kInf, -kInf, 1, 2}, {2, 2});
  Tensor y = ops::softmax(x); // PyTorch: NaN in the first row
  const double e = std::exp(1.0);
  check_close(y, {0, 0, 1 / (1 + e), e / (1 + e)}, 1e-15);
  y.backward(Tensor::from({1, 2, 3, 4}, {2, 2}, DType::f64));
  CHECK(x.grad().to_vector()[0] == 0);
  CHECK(x.grad().to_vector()[1] == 0);
  // along another axis the same (the column [-inf, -inf] of the transposed view)
  check_close(ops::softmax(ops::transpose(x.detach(), 0, 1), 0), {0, 1 / (1 + e), 0, e / (1 + e)}, 1e-15);
  // log_softmax gives NaN there, as PyTorch does
  CHECK(std::isnan(ops::log_softmax(x.detach()).to_vector()[0]));
}

TEST_CASE("documented difference: cross_entropy with nothing counted is 0 with zero gradient") {
  Tensor logits = leaf({1, 2, 3, 4}, {2, 2});
  Tensor loss = ops::cross_entropy(logits, Tensor::from_ints({0, 1}, {2}), Tensor::zeros({2}, DType::bool8));
  CHECK(loss.item() == 0); // PyTorch's mean: NaN
  loss.backward();
  check_same(logits.grad(), {0, 0, 0, 0});
  ops::CrossEntropyOptions all_ignored;
  all_ignored.ignore_index = 1;
  CHECK(ops::cross_entropy(logits.detach(), Tensor::from_ints({1, 1}, {2}), all_ignored).item() == 0);
}

TEST_CASE("documented difference: masked_softmax keeps excluding masked keys below d2l's -1e6 fill") {
  // row of 3 keys, length 2, kept logits far below -1e6: d2l's fill (-1e6) would take the weight;
  // here the kept keys share it
  const Tensor x = Tensor::from({-3e6, -3e6 + std::log(3.0), 0}, {1, 1, 3}, DType::f64);
  check_close(ops::masked_softmax(x, Tensor::from_ints({2}, {1})), {0.25, 0.75, 0}, 1e-9); // log 3 rounded at 3e6
  // a zero length gives a zero row (d2l: uniform)
  check_same(ops::masked_softmax(x, Tensor::from_ints({0}, {1})), {0, 0, 0});
}

// ---- found by the differential test (tests/test_differential.cpp) ----------------------------

TEST_CASE("matmul with an empty result column and a broadcast left batch writes inside dA") {
  // B (2, 2, 0): its batch stride is 0 because the shape is empty, which made the batch look
  // shared and fold into one gemm over batch * M rows of a dA that holds only A's (2, 1) batch
  Tensor a = leaf(V(12, 1.0), {2, 1, 3, 2});
  Tensor b = leaf({}, {2, 2, 0});
  Tensor y = ops::matmul(a, b);
  CHECK(y.shape() == Dims{2, 2, 3, 0});
  ops::sum(y).backward();
  check_same(a.grad(), V(12, 0.0)); // under ASan this wrote past the end of dA
  CHECK(b.grad().shape() == Dims{2, 2, 0});
}

TEST_CASE("var and std accumulate in double and follow PyTorch's gradient rules") {
  // float32 values near 1e29: the variance (~1e58) does not fit in float32, the std does
  Tensor x = leaf({1e29, -1e29, 3e29, 0}, {4}, DType::f32);
  Tensor s = ops::std(x, {0}, 0);
  CHECK(std::isfinite(s.item()));
  CHECK(s.item() == doctest::Approx(std::sqrt((1 + 1 + 9 + 0) / 4.0 - 0.75 * 0.75) * 1e29).epsilon(1e-6));
  // the gradient at a zero std is 0 (PyTorch's choice), not inf * 0 = NaN
  Tensor c = leaf({2, 2, 2}, {3});
  ops::std(c).backward();
  check_same(c.grad(), {0, 0, 0});
  // an infinite input gives infinite gradients to the finite ones (the mean's own term is left
  // out, as PyTorch does), not NaN everywhere
  Tensor d = leaf({1, 2, kInf}, {3});
  ops::var(d).backward();
  const V g = d.grad().to_vector();
  CHECK(g[0] == -kInf);
  CHECK(g[1] == -kInf);
  CHECK(std::isnan(g[2]));
}

TEST_CASE("pow with a scalar exponent takes PyTorch's special cases at the edges") {
  const Tensor x = Tensor::from({-kInf, -0.0, 4}, {3}, DType::f64);
  check_same(ops::pow(x, 0.5), {kNaN, -0.0, 2});   // sqrt: std::pow(-inf, 0.5) would be +inf
  check_same(ops::pow(x, -0.5), {kNaN, -kInf, 0.5}); // 1 / sqrt: std::pow(-0, -0.5) is +inf
  CHECK(std::signbit(ops::pow(x, 0.5).to_vector()[1]));
}

TEST_CASE("topk of a 0-d tensor is the tensor itself, even for k = 0") {
  Tensor x = leaf({2.5}, {});
  const ops::ValuesIndices t = ops::topk(x, 0);
  CHECK(t.values.shape() == Dims{});
  CHECK(t.values.item() == 2.5);
  CHECK(t.indices.item() == 0);
  t.values.backward();
  CHECK(x.grad().item() == 1);
}

TEST_CASE("sub refuses a bool operand as PyTorch does") {
  CHECK(contains(error_of<std::invalid_argument>([] {
                   ops::sub(Tensor::zeros({2}), Tensor::from({1, 0}, {2}, DType::bool8));
                 }),
                 "sub: subtracting a bool tensor"));
  CHECK(ops::add(Tensor::zeros({2}), Tensor::from({1, 0}, {2}, DType::bool8)).to_vector() == V{1, 0});
}
