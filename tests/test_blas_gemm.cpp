// test_blas_gemm.cpp - the engine's gemm (framework/engine/kernels/gemm.hpp) where it does not
// call BLAS's gemm: k = 0 (BLAS refuses lda 0 there) and one row of C (a gemv), against the book's
// gemm loop (framework/ops/matmul.cpp).
#include <doctest/doctest.h>

#include <cmath>

#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/gemm.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::kNaN;

namespace {
using V = std::vector<double>;
} // namespace

TEST_CASE("blas_gemm with k = 0: C = beta C, and beta 0 writes zeros over anything") {
  float c[6] = {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN};
  engine::blas_gemm(false, false, 2, 3, 0, 1.0f, nullptr, 0, nullptr, 3, 0.0f, c, 3);
  for (float v : c) CHECK(v == 0.0f);
  double d[4] = {1, 2, 3, 4};
  engine::blas_gemm(false, true, 2, 2, 0, 1.0, nullptr, 0, nullptr, 0, 2.0, d, 2);
  check_close(V(d, d + 4), {2, 4, 6, 8}, 0);
  engine::gemm<double>(false, false, 2, 2, 0, 1.0, nullptr, 0, nullptr, 2, 0.0, d, 2); // the splitting wrapper too
  check_close(V(d, d + 4), {0, 0, 0, 0}, 0);
}

TEST_CASE("blas_gemm with one row of C (a gemv): every transpose and beta against the book's gemm") {
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
        std::vector<double> c = {beta == 0.0 ? kNaN : 1.0, beta == 0.0 ? kNaN : 2.0, beta == 0.0 ? kNaN : 3.0};
        std::vector<double> want = c;
        book::gemm<double>(false, false, 1, n, k, 2.0, a.data(), k, b.data(), n, beta, want.data(), n);
        engine::blas_gemm(ta, tb, 1, n, k, 2.0, ta ? at.data() : a.data(), ta ? 2 : k, tb ? bt.data() : b.data(),
                           tb ? k : n, beta, c.data(), n);
        check_close(c, want, 1e-12);
        std::vector<float> af(at.begin(), at.end()), a32(a.begin(), a.end()), bf(b.begin(), b.end()), btf(bt.begin(), bt.end());
        std::vector<float> cf = {kNaN, kNaN, kNaN};
        if (beta != 0.0) cf = {1, 2, 3};
        engine::blas_gemm(ta, tb, 1, n, k, 2.0f, ta ? af.data() : a32.data(), ta ? 2 : k, tb ? btf.data() : bf.data(),
                           tb ? k : n, static_cast<float>(beta), cf.data(), n);
        check_close(V(cf.begin(), cf.end()), want, 1e-5);
      }
}
