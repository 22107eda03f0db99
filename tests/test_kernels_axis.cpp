// The kernels that work along one axis of an (outer, len, inner) layout - arg_reduce and topk
// (kernels/arg_reduce.hpp), softmax, log-softmax and log-sum-exp along a middle axis
// (kernels/axis_softmax.hpp) - and the select and empty-gemm loops (where_broadcast, blas_gemm
// with k = 0), each against its plain definition. Backward kernels are checked with a first
// write (the buffer starts as NaN and must not be read) and with accumulation (starts as 1).
#include <doctest/doctest.h>

#include <cmath>

#include "framework/engine/kernels/arg_reduce.hpp"
#include "framework/engine/kernels/axis_softmax.hpp"
#include "framework/engine/kernels/cross_entropy_rows.hpp"
#include "framework/engine/kernels/elementwise.hpp"
#include "framework/engine/kernels/gemm.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::kInf;
using test_support::kNaN;

namespace {

using V = std::vector<double>;

// x[o, k, i] of an (outer, len, inner) buffer as the column x[o, :, i].
V column(const V& x, std::int64_t o, std::int64_t i, std::int64_t len, std::int64_t inner) {
  V c;
  for (std::int64_t k = 0; k < len; ++k) c.push_back(x[static_cast<std::size_t>((o * len + k) * inner + i)]);
  return c;
}

} // namespace

TEST_CASE("arg_reduce: max and min per column, first index on ties, NaN wins") {
  // (outer 2, len 3, inner 2)
  const V x = {1, 5, 3, 5, 3, kNaN, //
               -1, 0, -1, 0, -2, 0};
  V value(4);
  std::vector<std::int64_t> index(4);
  kernels::arg_reduce<true, double>(value.data(), index.data(), x.data(), 2, 3, 2);
  CHECK(index == std::vector<std::int64_t>{1, 2, 0, 0});
  CHECK(value[0] == 3);
  CHECK(std::isnan(value[1]));
  kernels::arg_reduce<false, double>(value.data(), index.data(), x.data(), 2, 3, 2);
  CHECK(index == std::vector<std::int64_t>{0, 2, 2, 0});
  kernels::arg_reduce<true, double>(nullptr, index.data(), x.data(), 1, 6, 1); // values not wanted
  CHECK(index[0] == 5);
}

TEST_CASE("topk: the k best per column, sorted, ties by index, NaN ranked largest") {
  const V x = {4, kNaN, 4, 1, 7, 0}; // (1, 6, 1)
  V value(3);
  std::vector<std::int64_t> index(3);
  kernels::topk<true, double>(value.data(), index.data(), x.data(), 1, 6, 1, 3);
  CHECK(index == std::vector<std::int64_t>{1, 4, 0});
  kernels::topk<false, double>(value.data(), index.data(), x.data(), 1, 6, 1, 3);
  CHECK(index == std::vector<std::int64_t>{5, 3, 0});
  check_close(value, {0, 1, 4}, 0);
  // along a middle axis: (outer 1, len 3, inner 2), k 2
  const V y = {1, 9, 3, 8, 2, 7};
  V v2(4);
  std::vector<std::int64_t> i2(4);
  kernels::topk<true, double>(v2.data(), i2.data(), y.data(), 1, 3, 2, 2);
  check_close(v2, {3, 9, 2, 8}, 0);
  CHECK(i2 == std::vector<std::int64_t>{1, 0, 2, 1});
}

TEST_CASE("softmax_axis and log_softmax_axis: every column against the plain formula") {
  const std::int64_t outer = 2, len = 3, inner = 4;
  V x = test_support::randn({outer, len, inner}, 3).to_vector();
  x[static_cast<std::size_t>(0 * len * inner + 0 * inner + 1)] = -kInf; // one -inf entry
  for (std::int64_t k = 0; k < len; ++k) x[static_cast<std::size_t>((1 * len + k) * inner + 2)] = -kInf; // all -inf
  V y(x.size()), ly(x.size()), lse(static_cast<std::size_t>(outer * inner));
  kernels::softmax_axis_forward<double>(y.data(), x.data(), outer, len, inner);
  kernels::log_softmax_axis_forward<double>(ly.data(), x.data(), outer, len, inner);
  kernels::logsumexp_axis<double>(lse.data(), x.data(), outer, len, inner, true);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const V c = column(x, o, i, len, inner);
      double s = 0;
      for (double v : c) s += std::exp(v);
      const V got = column(y, o, i, len, inner), lgot = column(ly, o, i, len, inner);
      const bool empty = o == 1 && i == 2;
      const double l = lse[static_cast<std::size_t>(o * inner + i)];
      if (empty) CHECK(l == -kInf); // PyTorch's logsumexp of nothing but -inf
      else CHECK(l == doctest::Approx(std::log(s)).epsilon(1e-14));
      for (std::int64_t k = 0; k < len; ++k) {
        const auto j = static_cast<std::size_t>(k);
        CHECK(got[j] == doctest::Approx(empty ? 0.0 : std::exp(c[j]) / s).epsilon(1e-14));
        if (empty) CHECK(std::isnan(lgot[j])); // as PyTorch's log_softmax
        else if (c[j] != -kInf) CHECK(lgot[j] == doctest::Approx(c[j] - std::log(s)).epsilon(1e-14));
      }
    }
}

TEST_CASE("softmax_axis_backward and log_softmax_axis_backward: first write and accumulation") {
  const std::int64_t outer = 2, len = 3, inner = 2;
  const V x = test_support::randn({outer, len, inner}, 4).to_vector(), dy = test_support::randn({outer, len, inner}, 5).to_vector();
  V y(x.size()), ly(x.size());
  kernels::softmax_axis_forward<double>(y.data(), x.data(), outer, len, inner);
  kernels::log_softmax_axis_forward<double>(ly.data(), x.data(), outer, len, inner);
  V want_s(x.size()), want_l(x.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      double dot = 0, sum = 0;
      for (std::int64_t k = 0; k < len; ++k) {
        const auto at = static_cast<std::size_t>((o * len + k) * inner + i);
        dot += dy[at] * y[at];
        sum += dy[at];
      }
      for (std::int64_t k = 0; k < len; ++k) {
        const auto at = static_cast<std::size_t>((o * len + k) * inner + i);
        want_s[at] = y[at] * (dy[at] - dot);
        want_l[at] = dy[at] - y[at] * sum; // exp(log_softmax) = softmax
      }
    }
  for (bool first : {true, false}) {
    V ds(x.size(), first ? kNaN : 1.0), dl(x.size(), first ? kNaN : 1.0);
    kernels::softmax_axis_backward<double>(ds.data(), first, dy.data(), y.data(), outer, len, inner);
    kernels::log_softmax_axis_backward<double>(dl.data(), first, dy.data(), ly.data(), outer, len, inner);
    for (std::size_t j = 0; j < x.size(); ++j) {
      CHECK(ds[j] == doctest::Approx(want_s[j] + (first ? 0 : 1)).epsilon(1e-13));
      CHECK(dl[j] == doctest::Approx(want_l[j] + (first ? 0 : 1)).epsilon(1e-13));
    }
  }
}

TEST_CASE("where_broadcast: picks through broadcast strides") {
  const bool cond[2] = {true, false};          // (2, 1)
  const V a = {1, 2, 3}, b = {10, 20, 30, 40, 50, 60}; // (3) and (2, 3)
  V y(6);
  kernels::where_broadcast<double>(y.data(), cond, {1, 0}, a.data(), {0, 1}, b.data(), {3, 1}, {2, 3});
  check_close(y, {1, 2, 3, 40, 50, 60}, 0);
}

TEST_CASE("cross_entropy kernels: weighted rows, row losses, and V = 0") {
  const V x = {2, 0, 0, 0, 1, 0}; // 2 rows, V 3
  const std::vector<std::int64_t> target = {0, 1};
  const V weight = {0.5, 0};
  V p(6), loss(2, kNaN);
  const double total = kernels::cross_entropy_forward<double>(p.data(), loss.data(), x.data(), target.data(),
                                                              weight.data(), 2, 3);
  const double l0 = std::log(std::exp(2.0) + 2) - 2;
  CHECK(total == doctest::Approx(0.5 * l0).epsilon(1e-15));
  check_close(loss, {0.5 * l0, 0}, 1e-15); // an uncounted row's loss is 0
  // no classes: nothing read, nothing counted
  const V none = {1, 1};
  CHECK(kernels::cross_entropy_forward<double>(nullptr, loss.data(), nullptr, target.data(), none.data(), 2, 0) == 0);
  check_close(loss, {0, 0}, 0);
}

TEST_CASE("blas_gemm with k = 0: C = beta C, and beta 0 writes zeros over anything") {
  float c[6] = {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN};
  kernels::blas_gemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 0.0f, c, 3);
  for (float v : c) CHECK(v == 0.0f);
  double d[4] = {1, 2, 3, 4};
  kernels::blas_gemm(false, true, 2, 2, 0, 1.0, nullptr, 0, nullptr, 0, 2.0, d, 2);
  check_close(V(d, d + 4), {2, 4, 6, 8}, 0);
  kernels::gemm<double>(false, false, 2, 2, 0, 1.0, nullptr, 0, nullptr, 2, 0.0, d, 2); // the splitting wrapper too
  check_close(V(d, d + 4), {0, 0, 0, 0}, 0);
}

TEST_CASE("blas_gemm with one row of C (a gemv): every transpose and beta against a plain loop") {
  // C (1 x n) = alpha op(A) op(B) + beta C, op(A) (1 x k), op(B) (k x n), n = 3, k = 4
  const std::int64_t n = 3, k = 4;
  const std::vector<double> a = {1, -2, 0.5, 3}, b = {1, 2, 3, 4, 5, 6, -1, -2, -3, 0.25, 0.5, 0.75}; // b: (k x n)
  std::vector<double> bt(12), at(8, kNaN); // B transposed (n x k); A stored (k x 1) with lda 2
  for (std::int64_t i = 0; i < k; ++i) {
    for (std::int64_t j = 0; j < n; ++j) bt[static_cast<std::size_t>(j * k + i)] = b[static_cast<std::size_t>(i * n + j)];
    at[static_cast<std::size_t>(i * 2)] = a[static_cast<std::size_t>(i)];
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (double beta : {0.0, 0.5}) {
        CAPTURE(ta);
        CAPTURE(tb);
        CAPTURE(beta);
        std::vector<double> want(3), c = {beta == 0.0 ? kNaN : 1.0, beta == 0.0 ? kNaN : 2.0, beta == 0.0 ? kNaN : 3.0};
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::int64_t i = 0; i < k; ++i) s += a[static_cast<std::size_t>(i)] * b[static_cast<std::size_t>(i * n + j)];
          want[static_cast<std::size_t>(j)] = 2.0 * s + (beta == 0.0 ? 0.0 : beta * c[static_cast<std::size_t>(j)]);
        }
        kernels::blas_gemm(ta, tb, 1, n, k, 2.0, ta ? at.data() : a.data(), ta ? 2 : k, tb ? bt.data() : b.data(),
                           tb ? k : n, beta, c.data(), n);
        check_close(c, want, 1e-12);
        std::vector<float> af(at.begin(), at.end()), a32(a.begin(), a.end()), bf(b.begin(), b.end()), btf(bt.begin(), bt.end());
        std::vector<float> cf = {kNaN, kNaN, kNaN};
        if (beta != 0.0) cf = {1, 2, 3};
        kernels::blas_gemm(ta, tb, 1, n, k, 2.0f, ta ? af.data() : a32.data(), ta ? 2 : k, tb ? btf.data() : bf.data(),
                           tb ? k : n, static_cast<float>(beta), cf.data(), n);
        check_close(V(cf.begin(), cf.end()), want, 1e-5);
      }
}
