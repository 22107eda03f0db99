// Forward values of every op in framework/ops/ops.hpp on small hand-computed examples, and the
// error messages: every shape/dtype error is std::invalid_argument naming the op and the shapes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::contains;
using test_support::randn;

namespace {

using V = std::vector<double>;

Tensor T(const V& v, const Dims& s, DType d = DType::f64) { return Tensor::from(v, s, d); }
Tensor I(const std::vector<std::int64_t>& v, const Dims& s) { return Tensor::from_ints(v, s); }

// Shape and values (close within tol, see test_support::check_close).
void check_values(const Tensor& t, const Dims& shape, const V& want, double tol = 1e-12) {
  CHECK(t.shape() == shape);
  test_support::check_close(t, want, tol);
}


// Every error here is std::invalid_argument naming the op and the shapes.
template <typename F> std::string invalid_arg(F&& f) { return test_support::error_of<std::invalid_argument>(f); }

// Reference matmul for rank >= 2 operands with broadcast batch dims: plain loops over the
// logical (row-major) values, no strides, no BLAS.
V naive_matmul(const Tensor& a, const Tensor& b, Dims& out_shape) {
  const V av = a.to_vector(), bv = b.to_vector();
  const int ra = a.dim(), rb = b.dim();
  const std::int64_t M = a.shape()[ra - 2], K = a.shape()[ra - 1], N = b.shape()[rb - 1];
  const int r = std::max(ra, rb) - 2;
  std::vector<std::int64_t> ba(r, 1), bb(r, 1), bo(r, 1);
  for (int i = 0; i < ra - 2; ++i) ba[r - (ra - 2) + i] = a.shape()[i];
  for (int i = 0; i < rb - 2; ++i) bb[r - (rb - 2) + i] = b.shape()[i];
  for (int i = 0; i < r; ++i) bo[i] = std::max(ba[i], bb[i]);
  std::int64_t batches = 1;
  for (auto v : bo) batches *= v;
  out_shape = Dims(bo);
  out_shape.push_back(M);
  out_shape.push_back(N);
  V out(static_cast<std::size_t>(batches * M * N), 0.0);
  for (std::int64_t t = 0; t < batches; ++t) {
    // multi-index of batch t, then the flat batch index in a and in b (size-1 dims broadcast)
    std::int64_t rem = t, fa = 0, fb = 0, sa = 1, sb = 1;
    for (int i = r - 1; i >= 0; --i) {
      const std::int64_t idx = rem % bo[i];
      rem /= bo[i];
      fa += (ba[i] == 1 ? 0 : idx) * sa;
      fb += (bb[i] == 1 ? 0 : idx) * sb;
      sa *= ba[i];
      sb *= bb[i];
    }
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k)
          s += av[static_cast<std::size_t>(fa * M * K + i * K + k)] * bv[static_cast<std::size_t>(fb * K * N + k * N + j)];
        out[static_cast<std::size_t>(t * M * N + i * N + j)] = s;
      }
  }
  return out;
}

void check_matmul_vs_naive(const Tensor& a, const Tensor& b, double tol = 1e-12) {
  Dims s;
  const V want = naive_matmul(a, b, s);
  check_values(ops::matmul(a, b), s, want, tol);
}

} // namespace

// ---- views and copies ----------------------------------------------------------------------------

TEST_CASE("ops: to_dtype and clone") {
  Tensor x = T({1.75, -2.5, 3.0}, {3});
  Tensor f = ops::to_dtype(x, DType::f32);
  CHECK(f.dtype() == DType::f32);
  check_values(f, {3}, {1.75, -2.5, 3.0});
  CHECK(ops::to_dtype(x, DType::i64).to_int_vector() == std::vector<std::int64_t>{1, -2, 3}); // truncates
  CHECK(ops::to_dtype(x, DType::f64).same(x)); // same dtype: no copy
  CHECK(ops::to_dtype(I({0, 2}, {2}), DType::bool8).to_int_vector() == std::vector<std::int64_t>{0, 1});
  // a non-contiguous source is converted in logical order
  check_values(ops::to_dtype(T({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1), DType::f32), {3, 2}, {1, 4, 2, 5, 3, 6});
  // clone: contiguous, independent storage, same values
  Tensor t = T({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);
  Tensor c = ops::clone(t);
  CHECK(c.is_contiguous());
  CHECK(c.raw() != t.raw());
  check_values(c, {3, 2}, {1, 4, 2, 5, 3, 6});
  c.data<double>()[0] = 100;
  CHECK(t.to_vector()[0] == 1.0);
  CHECK(ops::clone(I({4, 5}, {2})).to_int_vector() == std::vector<std::int64_t>{4, 5});
}

TEST_CASE("ops: reshape, permute, transpose") {
  Tensor x = T({0, 1, 2, 3, 4, 5}, {2, 3});
  check_values(ops::reshape(x, {3, 2}), {3, 2}, {0, 1, 2, 3, 4, 5});
  check_values(ops::reshape(x, {-1}), {6}, {0, 1, 2, 3, 4, 5});
  check_values(ops::reshape(x, {1, -1, 1}), {1, 6, 1}, {0, 1, 2, 3, 4, 5});
  check_values(ops::reshape(T({7}, {1}), {}), {}, {7});
  CHECK(ops::reshape(x, {3, 2}).raw() == x.raw()); // contiguous: a view
  // reshape of a transpose copies in logical order
  check_values(ops::reshape(ops::transpose(x, 0, 1), {6}), {6}, {0, 3, 1, 4, 2, 5});
  // reshape of a slice keeps the slice's offset
  check_values(ops::reshape(ops::slice(x, 0, 1, 2), {3}), {3}, {3, 4, 5});

  check_values(ops::transpose(x, 0, 1), {3, 2}, {0, 3, 1, 4, 2, 5});
  check_values(ops::transpose(x, -1, -2), {3, 2}, {0, 3, 1, 4, 2, 5});
  Tensor y = ops::reshape(T(Tensor::arange(24, DType::f64).to_vector(), {24}), {2, 3, 4});
  Tensor p = ops::permute(y, {2, 0, 1}); // p[k, i, j] = y[i, j, k] = 12 i + 4 j + k
  CHECK(p.shape() == Dims{4, 2, 3});
  const V pv = p.to_vector();
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) CHECK(pv[k * 6 + i * 3 + j] == 12 * i + 4 * j + k);
  CHECK(p.raw() == y.raw()); // a view
  check_values(ops::permute(y, {-1, -3, -2}), {4, 2, 3}, pv);
  check_values(ops::permute(ops::permute(y, {2, 0, 1}), {1, 2, 0}), {2, 3, 4}, y.to_vector());
  check_values(ops::transpose(y, 0, 2), {4, 3, 2}, [&] {
    V v;
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 2; ++i) v.push_back(12 * i + 4 * j + k);
    return v;
  }());
}

TEST_CASE("ops: slice and concat") {
  Tensor x = T({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  check_values(ops::slice(x, 0, 1, 3), {2, 4}, {4, 5, 6, 7, 8, 9, 10, 11});
  check_values(ops::slice(x, 1, 1, 3), {3, 2}, {1, 2, 5, 6, 9, 10});
  check_values(ops::slice(x, -1, 3, 4), {3, 1}, {3, 7, 11});
  check_values(ops::slice(x, 0, 2, 2), {0, 4}, {}); // empty
  check_values(ops::slice(ops::slice(x, 1, 1, 4), 0, 1, 2), {1, 3}, {5, 6, 7}); // slice of a slice
  check_values(ops::slice(ops::transpose(x, 0, 1), 0, 2, 4), {2, 3}, {2, 6, 10, 3, 7, 11});

  Tensor a = T({1, 2, 3, 4}, {2, 2}), b = T({5, 6}, {1, 2}), c = T({7, 8, 9, 10, 11, 12}, {2, 3});
  check_values(ops::concat({a, b}, 0), {3, 2}, {1, 2, 3, 4, 5, 6});
  check_values(ops::concat({a, c}, 1), {2, 5}, {1, 2, 7, 8, 9, 3, 4, 10, 11, 12});
  check_values(ops::concat({a, c, a}, -1), {2, 7}, {1, 2, 7, 8, 9, 1, 2, 3, 4, 10, 11, 12, 3, 4});
  check_values(ops::concat({ops::transpose(a, 0, 1), b}, 0), {3, 2}, {1, 3, 2, 4, 5, 6});
  check_values(ops::concat({a}, 0), {2, 2}, {1, 2, 3, 4});
  CHECK(ops::concat({I({1}, {1}), I({2, 3}, {2})}, 0).to_int_vector() == std::vector<std::int64_t>{1, 2, 3});
}

// ---- elementwise ---------------------------------------------------------------------------------

TEST_CASE("ops: add, sub, mul, div with broadcasting") {
  Tensor a = T({1, 2, 3}, {1, 3}), b = T({10, 20}, {2, 1});
  check_values(ops::add(a, b), {2, 3}, {11, 12, 13, 21, 22, 23});
  check_values(ops::sub(a, b), {2, 3}, {-9, -8, -7, -19, -18, -17});
  check_values(ops::mul(a, b), {2, 3}, {10, 20, 30, 20, 40, 60});
  check_values(ops::div(a, b), {2, 3}, {0.1, 0.2, 0.3, 0.05, 0.1, 0.15});
  // (2, 1, 3) + (4, 1) -> (2, 4, 3)
  Tensor p = T({0, 1, 2, 3, 4, 5}, {2, 1, 3}), q = T({0, 10, 20, 30}, {4, 1});
  Tensor s = ops::add(p, q);
  CHECK(s.shape() == Dims{2, 4, 3});
  const V sv = s.to_vector();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) CHECK(sv[i * 12 + j * 3 + k] == 3 * i + k + 10 * j);
  // a scalar (0-d) operand, and a 1-D operand against the last axis
  check_values(ops::mul(T({1, 2, 3, 4}, {2, 2}), T({3}, {})), {2, 2}, {3, 6, 9, 12});
  check_values(ops::sub(T({1, 2, 3, 4}, {2, 2}), T({1, 2}, {2})), {2, 2}, {0, 0, 2, 2});
  check_values(ops::add(T({5}, {}), T({1}, {})), {}, {6});
  // non-contiguous operands
  Tensor m = T({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(ops::add(ops::transpose(m, 0, 1), T({10, 20}, {2})), {3, 2}, {11, 24, 12, 25, 13, 26});
  check_values(ops::mul(ops::transpose(m, 0, 1), ops::transpose(m, 0, 1)), {3, 2}, {1, 16, 4, 25, 9, 36});
  check_values(ops::div(ops::slice(m, 1, 1, 3), ops::slice(m, 1, 0, 2)), {2, 2}, {2, 1.5, 5.0 / 4, 6.0 / 5});
  // float32 (the training dtype) through the same kernels
  Tensor f = ops::add(T({1, 2}, {2}, DType::f32), T({0.5}, {1}, DType::f32));
  CHECK(f.dtype() == DType::f32);
  check_values(f, {2}, {1.5, 2.5});
  // operators
  check_values(a + b, {2, 3}, {11, 12, 13, 21, 22, 23});
  check_values(2.0 - a, {1, 3}, {1, 0, -1});
  check_values(a / 2.0, {1, 3}, {0.5, 1, 1.5});
  check_values(6.0 / a, {1, 3}, {6, 3, 2});
  check_values(-a * 2.0 + 1.0, {1, 3}, {-1, -3, -5});
}

TEST_CASE("ops: neg and the scalar variants") {
  Tensor x = T({1, -2, 4}, {3});
  check_values(ops::neg(x), {3}, {-1, 2, -4});
  check_values(ops::add_scalar(x, 0.5), {3}, {1.5, -1.5, 4.5});
  check_values(ops::mul_scalar(x, -3), {3}, {-3, 6, -12});
  check_values(ops::rsub_scalar(x, 1), {3}, {0, 3, -3});
  check_values(ops::rdiv_scalar(x, 2), {3}, {2, -1, 0.5});
  Tensor m = T({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(ops::neg(ops::transpose(m, 0, 1)), {3, 2}, {-1, -4, -2, -5, -3, -6});
  check_values(ops::add_scalar(ops::slice(m, 1, 1, 3), 1), {2, 2}, {3, 4, 6, 7});
  check_values(ops::rdiv_scalar(ops::transpose(m, 0, 1), 60), {3, 2}, {60, 15, 30, 12, 20, 10});
  check_values(ops::mul_scalar(T({2}, {}), 4), {}, {8});
}

TEST_CASE("ops: unary math") {
  Tensor x = T({-1, 0, 0.5, 2}, {2, 2});
  check_values(ops::exp(x), {2, 2}, {std::exp(-1.0), 1, std::exp(0.5), std::exp(2.0)});
  check_values(ops::tanh(x), {2, 2}, {std::tanh(-1.0), 0, std::tanh(0.5), std::tanh(2.0)});
  check_values(ops::relu(x), {2, 2}, {0, 0, 0.5, 2});
  Tensor p = T({0.25, 1, 4}, {3});
  check_values(ops::log(p), {3}, {std::log(0.25), 0, std::log(4.0)});
  check_values(ops::sqrt(p), {3}, {0.5, 1, 2});
  check_values(ops::pow(p, 2), {3}, {0.0625, 1, 16});
  check_values(ops::pow(p, 3), {3}, {0.015625, 1, 64});
  check_values(ops::pow(p, 0.5), {3}, {0.5, 1, 2});
  check_values(ops::pow(p, -1), {3}, {4, 1, 0.25});
  check_values(ops::pow(p, 0), {3}, {1, 1, 1});
  // gelu, tanh approximation (PyTorch's approximate="tanh"): gelu(1) = 0.8411919906082768
  auto gelu_ref = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
  };
  constexpr auto gelu_tanh = ops::GeluApproximate::tanh;
  check_values(ops::gelu(x, gelu_tanh), {2, 2}, {gelu_ref(-1), 0, gelu_ref(0.5), gelu_ref(2)});
  CHECK(ops::gelu(T({1}, {1}), gelu_tanh).item() == doctest::Approx(0.8411919906082768).epsilon(1e-12));
  CHECK(ops::gelu(T({-1}, {1}), gelu_tanh).item() == doctest::Approx(-0.15880800939172324).epsilon(1e-12));
  // a non-contiguous input keeps its logical order
  Tensor m = T({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(ops::sqrt(ops::transpose(m, 0, 1)), {3, 2},
               {1, 2, std::sqrt(2.0), std::sqrt(5.0), std::sqrt(3.0), std::sqrt(6.0)});
  // float32
  Tensor f = ops::exp(T({0, 1}, {2}, DType::f32));
  CHECK(f.dtype() == DType::f32);
  check_values(f, {2}, {1, std::exp(1.0)}, 1e-6);
}

TEST_CASE("ops: gelu erf form - values and gradient against PyTorch") {
  // torch.nn.functional.gelu(x) (approximate='none', the default) and its gradient, float64,
  // printed by torch 1.13
  const V xs = {-3, -1, -0.5, 0, 0.5, 1, 3};
  const V y_torch = {-0.00404969409489031, -0.15865525393145702, -0.15426876936299344, 0.0,
                     0.34573123063700656,  0.841344746068543,    2.99595030590511};
  const V dy_torch = {-0.01194564720418392, -0.08331547058768635, 0.13250487534383712, 0.5,
                      0.8674951246561629,   1.0833154705876864,   1.011945647204184};
  Tensor x = T(xs, {7});
  x.set_requires_grad(true);
  Tensor y = ops::gelu(x);
  check_values(y, {7}, y_torch, 1e-15);
  ops::sum(y).backward();
  check_values(x.grad(), {7}, dy_torch, 1e-15);
  // the default is the erf form, and it differs from the tanh form (by ~1.6e-4 at x = 1)
  check_values(ops::gelu(x, ops::GeluApproximate::none), {7}, y_torch, 0);
  CHECK(std::abs(ops::gelu(T({1}, {1}), ops::GeluApproximate::tanh).item() - y_torch[5]) > 1e-4);
  // float32 and the edges PyTorch has: NaN stays NaN, +inf stays +inf, -inf gives NaN (-inf * 0)
  const double inf = std::numeric_limits<double>::infinity();
  const V f = ops::gelu(T({std::nan(""), inf, -inf, -10.0, 1.0}, {5}, DType::f32)).to_vector();
  CHECK(std::isnan(f[0]));
  CHECK(f[1] == inf);
  CHECK(std::isnan(f[2]));
  CHECK(std::abs(f[3]) < 1e-20);
  CHECK(f[4] == doctest::Approx(0.841344746068543).epsilon(1e-6));
}

// ---- reductions ----------------------------------------------------------------------------------

TEST_CASE("ops: sum and mean over axes, keepdim") {
  // x[i, j, k] = 12 i + 4 j + k, shape (2, 3, 4)
  Tensor x = ops::reshape(T(Tensor::arange(24, DType::f64).to_vector(), {24}), {2, 3, 4});
  check_values(ops::sum(x), {}, {276});
  check_values(ops::sum(x, {}, true), {1, 1, 1}, {276});
  check_values(ops::sum(x, {0}), {3, 4}, {12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34});
  check_values(ops::sum(x, {1}), {2, 4}, {12, 15, 18, 21, 48, 51, 54, 57});
  check_values(ops::sum(x, {-1}), {2, 3}, {6, 22, 38, 54, 70, 86});
  check_values(ops::sum(x, {2}, true), {2, 3, 1}, {6, 22, 38, 54, 70, 86});
  check_values(ops::sum(x, {0, 2}), {3}, {60, 92, 124});
  check_values(ops::sum(x, {2, 0}, true), {1, 3, 1}, {60, 92, 124});
  check_values(ops::sum(x, {0, 1, 2}), {}, {276});
  check_values(ops::mean(x), {}, {11.5});
  check_values(ops::mean(x, {1}), {2, 4}, {4, 5, 6, 7, 16, 17, 18, 19});
  check_values(ops::mean(x, {-1, 0}, true), {1, 3, 1}, {7.5, 11.5, 15.5});
  // reductions of a view
  check_values(ops::sum(ops::transpose(T({1, 2, 3, 4, 5, 6}, {2, 3}), 0, 1), {1}), {3}, {5, 7, 9});
  check_values(ops::mean(ops::slice(T({1, 2, 3, 4, 5, 6}, {2, 3}), 1, 1, 3), {0}), {2}, {3.5, 4.5});
  // sum of a scalar, and over a size-1 axis
  check_values(ops::sum(T({3}, {})), {}, {3});
  check_values(ops::sum(T({1, 2, 3}, {3, 1}), {1}), {3}, {1, 2, 3});
}

TEST_CASE("ops: max over an axis") {
  Tensor x = T({3, 9, 1, 4, 2, 8, 7, 5, 6, 0, 11, 10}, {3, 4});
  check_values(ops::max(x, 1), {3}, {9, 8, 11});
  check_values(ops::max(x, -1, true), {3, 1}, {9, 8, 11});
  check_values(ops::max(x, 0), {4}, {6, 9, 11, 10});
  check_values(ops::max(x, 0, true), {1, 4}, {6, 9, 11, 10});
  check_values(ops::max(ops::transpose(x, 0, 1), 0), {3}, {9, 8, 11});
  Tensor y = ops::reshape(x, {2, 3, 2}); // middle axis
  check_values(ops::max(y, 1), {2, 2}, {3, 9, 11, 10}); // [[3,9],[1,4],[2,8]] [[7,5],[6,0],[11,10]]
  check_values(ops::max(T({-5, -2, -7}, {3}), 0), {}, {-2});
  // ties: the gradient goes to the first argmax
  Tensor t = T({1, 3, 3, 2}, {4});
  t.set_requires_grad(true);
  ops::max(t, 0).backward();
  check_values(t.grad(), {4}, {0, 1, 0, 0});
}

TEST_CASE("ops: sum_to") {
  Tensor x = T({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(ops::sum_to(x, {3}), {3}, {5, 7, 9});
  check_values(ops::sum_to(x, {1, 3}), {1, 3}, {5, 7, 9});
  check_values(ops::sum_to(x, {2, 1}), {2, 1}, {6, 15});
  check_values(ops::sum_to(x, {}), {}, {21});
  check_values(ops::sum_to(x, {1, 1}), {1, 1}, {21});
  CHECK(ops::sum_to(x, {2, 3}).same(x));
  check_values(ops::sum_to(ops::transpose(x, 0, 1), {1, 2}), {1, 2}, {6, 15});
}

// ---- softmax -------------------------------------------------------------------------------------

TEST_CASE("ops: softmax and log_softmax") {
  Tensor x = T({1, 2, 3, 1, 1, 1}, {2, 3});
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), z = e1 + e2 + e3;
  check_values(ops::softmax(x), {2, 3}, {e1 / z, e2 / z, e3 / z, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  check_values(ops::log_softmax(x), {2, 3},
               {1 - std::log(z), 2 - std::log(z), 3 - std::log(z), -std::log(3.0), -std::log(3.0), -std::log(3.0)});
  // rows sum to 1 (3-D, random)
  Tensor r = ops::softmax(randn({2, 3, 5}, 1));
  const V rv = r.to_vector();
  for (int row = 0; row < 6; ++row) {
    double s = 0;
    for (int j = 0; j < 5; ++j) {
      CHECK(rv[row * 5 + j] > 0);
      s += rv[row * 5 + j];
    }
    CHECK(s == doctest::Approx(1.0).epsilon(1e-14));
  }
  // 1-D
  check_values(ops::softmax(T({0, std::log(3.0)}, {2})), {2}, {0.25, 0.75});
  // stability: large logits give the same result as shifted ones, no inf/NaN
  Tensor big = ops::softmax(T({1000, 1001, 1002}, {3}));
  check_values(big, {3}, {e1 / z, e2 / z, e3 / z});
  check_values(ops::softmax(T({-1000, -1001, -1002}, {3})), {3}, {e3 / z, e2 / z, e1 / z});
  check_values(ops::log_softmax(T({1000, 1001, 1002}, {3})), {3},
               {1 - std::log(z), 2 - std::log(z), 3 - std::log(z)});
  Tensor big32 = ops::softmax(T({1000, 1001, 1002}, {3}, DType::f32));
  CHECK(big32.dtype() == DType::f32);
  check_values(big32, {3}, {e1 / z, e2 / z, e3 / z}, 1e-6);
  for (double v : ops::log_softmax(T({1000, -1000}, {2}, DType::f32)).to_vector()) CHECK(std::isfinite(v));
  // log_softmax == log(softmax) on random data; a non-contiguous input works
  Tensor y = randn({4, 3}, 2);
  const V ls = ops::log_softmax(ops::transpose(y, 0, 1)).to_vector();
  const V sm = ops::softmax(ops::transpose(y, 0, 1)).to_vector();
  for (std::size_t i = 0; i < ls.size(); ++i) CHECK(ls[i] == doctest::Approx(std::log(sm[i])).epsilon(1e-12));
  // one column: softmax is 1, log_softmax 0
  check_values(ops::softmax(T({5, -3}, {2, 1})), {2, 1}, {1, 1});
  check_values(ops::log_softmax(T({5, -3}, {2, 1})), {2, 1}, {0, 0});
}

// ---- matmul --------------------------------------------------------------------------------------

TEST_CASE("ops: matmul values") {
  Tensor a = T({1, 2, 3, 4, 5, 6}, {2, 3}), b = T({7, 8, 9, 10, 11, 12}, {3, 2});
  check_values(ops::matmul(a, b), {2, 2}, {58, 64, 139, 154});
  check_values(ops::matmul(T({1, 2, 3}, {3}), b), {2}, {58, 64});        // 1-D @ 2-D
  check_values(ops::matmul(a, T({1, 0, -1}, {3})), {2}, {-2, -2});       // 2-D @ 1-D
  check_values(ops::matmul(T({1, 2, 3}, {3}), T({4, 5, 6}, {3})), {}, {32}); // 1-D @ 1-D
  // transposed operands (BLAS Trans flags): a^T b^T = (b a)^T
  check_values(ops::matmul(ops::transpose(b, 0, 1), ops::transpose(a, 0, 1)), {2, 2}, {58, 139, 64, 154});
  check_values(ops::matmul(ops::transpose(a, 0, 1), a), {3, 3}, {17, 22, 27, 22, 29, 36, 27, 36, 45});
  // float32
  Tensor c32 = ops::matmul(T({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32), T({7, 8, 9, 10, 11, 12}, {3, 2}, DType::f32));
  CHECK(c32.dtype() == DType::f32);
  check_values(c32, {2, 2}, {58, 64, 139, 154});
}

TEST_CASE("ops: matmul batched and broadcast vs a naive loop") {
  check_matmul_vs_naive(randn({2, 3, 4}, 1), randn({2, 4, 5}, 2));
  check_matmul_vs_naive(randn({2, 1, 3, 4}, 3), randn({5, 4, 2}, 4)); // batch dims broadcast
  check_matmul_vs_naive(randn({3, 4}, 5), randn({2, 4, 2}, 6));       // 2-D left, batched right
  check_matmul_vs_naive(randn({2, 3, 4}, 7), randn({4, 5}, 8));       // fold path
  check_matmul_vs_naive(randn({3, 2, 4}, 9), randn({1, 4, 2}, 10));   // fold, size-1 batch on b
  check_matmul_vs_naive(randn({1, 3, 4}, 11), randn({3, 4, 2}, 12));  // size-1 batch on a
  check_matmul_vs_naive(randn({2, 3, 2, 4}, 13), randn({2, 3, 4, 2}, 14));
  check_matmul_vs_naive(randn({1, 4}, 15), randn({4, 1}, 16));
  check_matmul_vs_naive(randn({5, 1}, 17), randn({1, 3}, 18)); // K = 1 (outer product)
  // non-contiguous operands: transposed last two dims (Trans flag), a batch-permuted operand
  // BLAS cannot describe (copied), a transposed 2-D rhs on the fold path
  Tensor a = randn({2, 4, 3}, 19), b = randn({2, 5, 4}, 20);
  Dims s;
  const V want = naive_matmul(ops::clone(ops::transpose(a, -1, -2)), ops::clone(ops::transpose(b, -1, -2)), s);
  check_values(ops::matmul(ops::transpose(a, -1, -2), ops::transpose(b, -1, -2)), s, want);
  Tensor c = randn({3, 2, 4}, 21), d = randn({4, 3}, 22);
  const V want2 = naive_matmul(ops::clone(ops::permute(c, {1, 0, 2})), d, s);
  check_values(ops::matmul(ops::permute(c, {1, 0, 2}), d), s, want2);
  Tensor e = randn({2, 3, 4}, 23), f = randn({5, 4}, 24);
  const V want3 = naive_matmul(e, ops::clone(ops::transpose(f, 0, 1)), s);
  check_values(ops::matmul(e, ops::transpose(f, 0, 1)), s, want3);
  // slices with a row stride larger than the row (leading dimension > cols)
  Tensor g = randn({4, 6}, 25), h = randn({3, 5}, 26);
  const V want4 = naive_matmul(ops::clone(ops::slice(g, 1, 1, 4)), ops::clone(ops::slice(h, 1, 0, 2)), s);
  check_values(ops::matmul(ops::slice(g, 1, 1, 4), ops::slice(h, 1, 0, 2)), s, want4);
  // 1-D with a batched operand
  Tensor v = randn({4}, 27), m = randn({2, 4, 3}, 28);
  const V want5 = naive_matmul(ops::reshape(v, {1, 4}), m, s);
  check_values(ops::matmul(v, m), {2, 3}, want5);
  const V want6 = naive_matmul(ops::transpose(m, -1, -2).clone(), ops::reshape(randn({4}, 29), {4, 1}), s);
  check_values(ops::matmul(ops::transpose(m, -1, -2), randn({4}, 29)), {2, 3}, want6);
  // float32 batched broadcast
  Tensor a32 = randn({2, 1, 3, 4}, 30, DType::f32), b32 = randn({5, 4, 2}, 31, DType::f32);
  const V want7 = naive_matmul(a32, b32, s);
  check_values(ops::matmul(a32, b32), s, want7, 1e-5);
}

// ---- indexing ------------------------------------------------------------------------------------

TEST_CASE("ops: index_select, gather, embedding") {
  Tensor x = T({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3});
  check_values(ops::index_select(x, 0, I({2, 0, 2}, {3})), {3, 3}, {20, 21, 22, 0, 1, 2, 20, 21, 22});
  check_values(ops::index_select(x, 1, I({2, 2, 0}, {3})), {4, 3}, {2, 2, 0, 12, 12, 10, 22, 22, 20, 32, 32, 30});
  check_values(ops::index_select(x, -1, I({1}, {1})), {4, 1}, {1, 11, 21, 31});
  check_values(ops::index_select(x, 0, I({}, {0})), {0, 3}, {});
  check_values(ops::index_select(ops::transpose(x, 0, 1), 0, I({1}, {1})), {1, 4}, {1, 11, 21, 31});
  // gather: out[i, j] = x[i, idx[i, j]] (axis 1); out[i, j] = x[idx[i, j], j] (axis 0)
  check_values(ops::gather(x, 1, I({2, 0, 1, 1, 0, 0, 2, 2}, {4, 2})), {4, 2}, {2, 0, 11, 11, 20, 20, 32, 32});
  check_values(ops::gather(x, 0, I({3, 0, 1}, {1, 3})), {1, 3}, {30, 1, 12});
  check_values(ops::gather(x, -1, I({1, 1, 1, 1}, {4, 1})), {4, 1}, {1, 11, 21, 31});
  // 3-D gather over the middle axis
  Tensor y = ops::reshape(x, {2, 2, 3}); // [[0,1,2],[10,11,12]], [[20,21,22],[30,31,32]]
  check_values(ops::gather(y, 1, I({1, 0, 1, 0, 0, 0}, {2, 1, 3})), {2, 1, 3}, {10, 1, 12, 20, 21, 22});
  // embedding: rows of W picked by tokens of any shape
  Tensor w = T({0, 0.5, 1, 1.5, 2, 2.5}, {3, 2});
  check_values(ops::embedding(w, I({2, 0, 2}, {3})), {3, 2}, {2, 2.5, 0, 0.5, 2, 2.5});
  check_values(ops::embedding(w, I({1, 1, 0, 2}, {2, 2})), {2, 2, 2}, {1, 1.5, 1, 1.5, 0, 0.5, 2, 2.5});
  check_values(ops::embedding(w, I({1}, {})), {2}, {1, 1.5});
  // float32 rows
  check_values(ops::embedding(ops::to_dtype(w, DType::f32), I({2}, {1})), {1, 2}, {2, 2.5});
  // gradients of repeated indices add up
  Tensor wg = T({0, 0, 0, 0, 0, 0}, {3, 2});
  wg.set_requires_grad(true);
  ops::sum(ops::embedding(wg, I({2, 0, 2, 2}, {4}))).backward();
  check_values(wg.grad(), {3, 2}, {1, 1, 0, 0, 3, 3});
}

// ---- errors --------------------------------------------------------------------------------------

TEST_CASE("ops: errors name the op and the shapes") {
  Tensor a23 = Tensor::zeros({2, 3}, DType::f64), a45 = Tensor::zeros({4, 5}, DType::f64);

  // matmul
  CHECK(invalid_arg([&] { ops::matmul(a23, a45); }) == "matmul: inner dimensions differ: [2, 3] @ [4, 5]");
  CHECK(invalid_arg([&] { ops::matmul(a23, Tensor::zeros({4}, DType::f64)); }) ==
        "matmul: inner dimensions differ: [2, 3] @ [4]");
  CHECK(invalid_arg([&] { ops::matmul(Tensor::zeros({4}, DType::f64), a23); }) ==
        "matmul: inner dimensions differ: [4] @ [2, 3]");
  CHECK(invalid_arg([&] { ops::matmul(Tensor::zeros({3}, DType::f64), Tensor::zeros({4}, DType::f64)); }) ==
        "matmul: inner dimensions differ: [3] @ [4]");
  {
    const std::string m = invalid_arg(
        [&] { ops::matmul(Tensor::zeros({2, 2, 3}, DType::f64), Tensor::zeros({3, 3, 4}, DType::f64)); });
    CHECK(contains(m, "matmul:"));
    CHECK(contains(m, "[2, 2, 3]"));
    CHECK(contains(m, "[3, 3, 4]"));
  }
  {
    const std::string m = invalid_arg([&] { ops::matmul(a23, Tensor::zeros({3, 2}, DType::f32)); });
    CHECK(m == "matmul: dtypes differ: [2, 3] float64 @ [3, 2] float32");
  }
  CHECK(contains(invalid_arg([&] { ops::matmul(Tensor::zeros({}, DType::f64), a23); }), "matmul: "));

  // elementwise
  CHECK(invalid_arg([&] { ops::add(a23, Tensor::zeros({4}, DType::f64)); }) ==
        "add: shapes [2, 3] and [4] cannot be broadcast");
  CHECK(invalid_arg([&] { ops::sub(a23, Tensor::zeros({3, 3}, DType::f64)); }) ==
        "sub: shapes [2, 3] and [3, 3] cannot be broadcast");
  CHECK(invalid_arg([&] { ops::mul(Tensor::zeros({2, 1, 3}, DType::f64), Tensor::zeros({4, 2}, DType::f64)); }) ==
        "mul: shapes [2, 1, 3] and [4, 2] cannot be broadcast");
  CHECK(invalid_arg([&] { ops::div(a23, Tensor::zeros({2}, DType::f64)); }) ==
        "div: shapes [2, 3] and [2] cannot be broadcast");
  CHECK(invalid_arg([&] { ops::add(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)); }) ==
        "add: dtypes differ: [2] float32 and [2] float64");
  CHECK(invalid_arg([&] { ops::mul(Tensor::zeros({2}, DType::i64), Tensor::zeros({2}, DType::i64)); }) ==
        "mul: expected a float32 or float64 tensor, got int64");
  CHECK(invalid_arg([&] { ops::exp(Tensor::zeros({2}, DType::i64)); }) ==
        "exp: expected a float32 or float64 tensor, got int64");
  CHECK(contains(invalid_arg([&] { ops::neg(Tensor::zeros({2}, DType::bool8)); }), "neg: "));
  CHECK(contains(invalid_arg([&] { ops::rdiv_scalar(Tensor::zeros({2}, DType::i64), 1.0); }), "rdiv_scalar: "));

  // shape ops
  CHECK(invalid_arg([&] { ops::reshape(a23, {4}); }) == "reshape: cannot reshape [2, 3] (6 elements) into [4] (4 elements)");
  CHECK(invalid_arg([&] { ops::reshape(a23, {4, -1}); }) == "reshape: cannot reshape [2, 3] into [4, -1]");
  CHECK(invalid_arg([&] { ops::reshape(a23, {-1, -1}); }) == "reshape: only one -1 allowed in shape [-1, -1]");
  CHECK(contains(invalid_arg([&] { a23.transpose(0, 1).view({6}); }), "view: tensor of shape [3, 2]"));
  {
    const std::string m = invalid_arg([&] { ops::permute(a23, {0, 0}); });
    CHECK(contains(m, "permute: order [0, 0] repeats axis 0"));
    CHECK(contains(m, "[2, 3]"));
  }
  CHECK(invalid_arg([&] { ops::permute(a23, {0, 1, 2}); }) ==
        "permute: order [0, 1, 2] does not match a tensor of shape [2, 3]");
  CHECK(invalid_arg([&] { ops::permute(a23, {0, 2}); }) == "permute: axis 2 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::transpose(a23, 0, 2); }) == "transpose: axis 2 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::slice(a23, 1, 0, 5); }) == "slice: range [0, 5) is outside axis 1 of size 3 (shape [2, 3])");
  CHECK(invalid_arg([&] { ops::slice(a23, 0, -1, 1); }) == "slice: range [-1, 1) is outside axis 0 of size 2 (shape [2, 3])");
  CHECK(invalid_arg([&] { ops::slice(a23, 0, 2, 1); }) == "slice: range [2, 1) is outside axis 0 of size 2 (shape [2, 3])");
  CHECK(invalid_arg([&] { ops::slice(a23, 2, 0, 1); }) == "slice: axis 2 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::concat({a23, Tensor::zeros({3, 3}, DType::f64)}, 1); }) ==
        "concat: shapes [2, 3] and [3, 3] (float64 and float64) do not match off axis 1");
  CHECK(contains(invalid_arg([&] { ops::concat({a23, Tensor::zeros({2, 3})}, 0); }), "float32"));
  CHECK(contains(invalid_arg([&] { ops::concat({a23, Tensor::zeros({6}, DType::f64)}, 0); }), "[6]"));
  CHECK(invalid_arg([&] { ops::concat({}, 0); }) == "concat: no tensors given");
  CHECK(invalid_arg([&] { ops::concat({a23}, -3); }) == "concat: axis -3 is out of range for a tensor of rank 2");

  // reductions
  CHECK(invalid_arg([&] { ops::sum(a23, {2}); }) == "sum: axis 2 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::sum(a23, {-3}); }) == "sum: axis -3 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::sum(a23, {1, -1}); }) == "sum: axes [1, -1] repeat axis 1");
  CHECK(invalid_arg([&] { ops::mean(a23, {5}); }) == "mean: axis 5 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::mean(Tensor::zeros({0, 3}, DType::f64), {0}); }) ==
        "mean: reducing an empty tensor of shape [0, 3]");
  CHECK(invalid_arg([&] { ops::max(a23, 2); }) == "max: axis 2 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::max(Tensor::zeros({2, 0}, DType::f64), 1); }) == "max: axis 1 of shape [2, 0] is empty");
  CHECK(invalid_arg([&] { ops::sum_to(a23, {4}); }) == "sum_to: shapes [4] and [2, 3] cannot be broadcast");
  CHECK(invalid_arg([&] { ops::sum_to(a23, {5, 2, 3}); }) == "sum_to: shape [5, 2, 3] does not broadcast to [2, 3]");

  // softmax (a 0-d x is one row of one element, as PyTorch: see test_op_semantics.cpp)
  CHECK(invalid_arg([&] { ops::softmax(Tensor::zeros({}, DType::f64), 1); }) ==
        "softmax: axis 1 is out of range for a 0-d tensor (0 or -1)");
  CHECK(invalid_arg([&] { ops::softmax(Tensor::zeros({2}, DType::i64)); }) ==
        "softmax: expected a float32 or float64 tensor, got int64");

  // indexing
  Tensor x32 = Tensor::zeros({3, 2}, DType::f64);
  CHECK(invalid_arg([&] { ops::index_select(x32, 0, I({0, 5}, {2})); }) ==
        "index_select: index 5 is out of range [0, 3) for a tensor of shape [3, 2]");
  CHECK(invalid_arg([&] { ops::index_select(x32, 1, I({-1}, {1})); }) ==
        "index_select: index -1 is out of range [0, 2) for a tensor of shape [3, 2]");
  CHECK(invalid_arg([&] { ops::index_select(x32, 0, I({0, 1}, {1, 2})); }) ==
        "index_select: index must be 1-D or 0-d, got shape [1, 2]");
  CHECK(invalid_arg([&] { ops::index_select(x32, 0, Tensor::zeros({2})); }) ==
        "index_select: index must be int64, got float32 of shape [2]");
  CHECK(invalid_arg([&] { ops::index_select(x32, 2, I({0}, {1})); }) ==
        "index_select: axis 2 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::gather(a23, 1, I({0, 1}, {2})); }) == "gather: index shape [2] must have the rank of x [2, 3]");
  CHECK(invalid_arg([&] { ops::gather(a23, 1, I({0, 1, 2}, {3, 1})); }) ==
        "gather: index shape [3, 1] is larger than x shape [2, 3] off axis 1");
  CHECK(invalid_arg([&] { ops::gather(a23, 1, I({0, 3}, {2, 1})); }) ==
        "gather: index 3 is out of range [0, 3) for a tensor of shape [2, 3]");
  CHECK(invalid_arg([&] { ops::gather(a23, -3, I({0}, {1, 1})); }) == "gather: axis -3 is out of range for a tensor of rank 2");
  CHECK(invalid_arg([&] { ops::embedding(Tensor::zeros({3}, DType::f64), I({0}, {1})); }) ==
        "embedding: weight must be (V, d), got [3]");
  CHECK(invalid_arg([&] { ops::embedding(x32, Tensor::zeros({2})); }) ==
        "embedding: index must be int64, got float32 of shape [2]");
  {
    const std::string m = invalid_arg([&] { ops::embedding(x32, I({0, 3}, {2})); });
    CHECK(contains(m, "embedding:"));
    CHECK(contains(m, "3"));
    CHECK(contains(m, "[3, 2]"));
  }
}

TEST_CASE("ops: a failed op leaves no graph behind and inputs intact") {
  Tensor x = randn({2, 3}, 40);
  x.set_requires_grad(true);
  const V before = x.to_vector();
  CHECK_THROWS_AS(ops::matmul(x, x), std::invalid_argument);
  CHECK_THROWS_AS(ops::add(x, Tensor::zeros({4}, DType::f64)), std::invalid_argument);
  CHECK(x.to_vector() == before);
  CHECK_FALSE(x.grad().defined());
  // the op works afterwards
  ops::sum(ops::matmul(x, ops::transpose(x, 0, 1))).backward();
  CHECK(x.grad().defined());
}

TEST_CASE("ops: empty tensors flow through without touching memory") {
  Tensor e = Tensor::zeros({0, 3}, DType::f64);
  e.set_requires_grad(true);
  CHECK(ops::add(e, Tensor::ones({3}, DType::f64)).shape() == Dims{0, 3});
  CHECK(ops::exp(e).shape() == Dims{0, 3});
  CHECK(ops::sum(e, {0}).to_vector() == V{0, 0, 0});
  CHECK(ops::softmax(e).shape() == Dims{0, 3});
  CHECK(ops::matmul(e, Tensor::ones({3, 2}, DType::f64)).shape() == Dims{0, 2});
  CHECK(ops::concat({e, Tensor::ones({1, 3}, DType::f64)}, 0).shape() == Dims{1, 3});
  ops::sum(ops::mul(ops::exp(e), e)).backward();
  CHECK(e.grad().shape() == Dims{0, 3});
}
