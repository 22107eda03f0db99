// test_matmul_batched.cpp - the batched matmul path that spreads per-head gemms over OpenMP
// threads (framework/engine/kernels/gemm_batched.hpp): same results as the book's gemm loop,
// forward and backward, with transposed operands and with a broadcast operand (whose gradient must stay serial).
// The shapes are chosen above the parallel threshold, and the test asserts that they are, so the
// threaded path is the one under test.
#include <doctest/doctest.h>

#include <cblas.h>
#include <omp.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/gemm_batched.hpp"
#include "framework/engine/kernels/small_gemm.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;

namespace {

// C[b] = A[b] @ B[b] by the book's gemm loop (framework/ops/matmul.cpp) over row-major (batch, m, k)
// and (batch, k, n) values; a batch extent of 1 broadcasts.
std::vector<double> loops_bmm(const std::vector<double>& a, std::int64_t ba, const std::vector<double>& b,
                              std::int64_t bb, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n) {
  std::vector<double> c(static_cast<std::size_t>(batch * m * n));
  for (std::int64_t i = 0; i < batch; ++i)
    book::gemm<double>(false, false, m, n, k, 1.0, a.data() + (ba == 1 ? 0 : i) * m * k, k,
                       b.data() + (bb == 1 ? 0 : i) * k * n, n, 0.0, c.data() + i * m * n, n);
  return c;
}

// The values of x transposed in its last two axes, as a row-major vector.
std::vector<double> transposed(const Tensor& x) { return x.transpose(-2, -1).contiguous().to_vector(); }

struct TwoThreads {
  int omp = omp_get_max_threads(), blas = openblas_get_num_threads();
  TwoThreads() {
    omp_set_num_threads(2);
    openblas_set_num_threads(2);
  }
  ~TwoThreads() {
    omp_set_num_threads(omp);
    openblas_set_num_threads(blas);
  }
};

} // namespace

TEST_CASE("batched Q K^T and W V over threads equal plain loops, forward and backward (float64 and float32)") {
  TwoThreads threads;
  const std::int64_t batch = 6, T = 40, dh = 24; // m*n*k = 38400 >= the parallel threshold
  REQUIRE(engine::batch_in_parallel(batch, T, T, dh, true));
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(dt));
    // float: BLAS blocks sum the 24..40-term dot products in another order than the loops in
    // double; with |terms| ~ N(0,1)^2 that is ~k * 6e-8 * sum|q k| ~ 1e-4 at worst (seeded data)
    const double tol = dt == DType::f64 ? 1e-11 : 2e-4;
    Generator g(11);
    Tensor q = Tensor::normal({batch, T, dh}, 0, 1, g, dt), k = Tensor::normal({batch, T, dh}, 0, 1, g, dt);
    Tensor v = Tensor::normal({batch, T, dh}, 0, 1, g, dt);
    for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
    Tensor s = ops::matmul(q, k.transpose(1, 2)); // (batch, T, T): B read through the Trans flag
    Tensor o = ops::matmul(s, v);                 // (batch, T, dh)
    const auto qv = q.to_vector(), kt = transposed(k), vv = v.to_vector();
    const auto s_want = loops_bmm(qv, batch, kt, batch, batch, T, dh, T);
    check_close(s.to_vector(), s_want, tol, /*rtol=*/0);
    check_close(o.to_vector(), loops_bmm(s_want, batch, vv, batch, batch, T, T, dh), tol * 10, /*rtol=*/0);

    // loss = sum(o * G): dO = G; dS = G V^T; dV = S^T G; dQ = dS K; dK = dS^T Q
    Tensor G = Tensor::normal({batch, T, dh}, 0, 1, g, dt);
    ops::sum(ops::mul(o, G)).backward();
    const auto gv = G.to_vector();
    const auto ds = loops_bmm(gv, batch, transposed(v), batch, batch, T, dh, T);
    check_close(v.grad().to_vector(), loops_bmm(transposed(s.detach()), batch, gv, batch, batch, T, T, dh), tol * 10, /*rtol=*/0);
    check_close(q.grad().to_vector(), loops_bmm(ds, batch, k.detach().to_vector(), batch, batch, T, T, dh), tol * 10, /*rtol=*/0);
    Tensor dsT = Tensor::from(ds, {batch, T, T}, DType::f64);
    check_close(k.grad().to_vector(), loops_bmm(transposed(dsT), batch, qv, batch, batch, T, T, dh), tol * 10, /*rtol=*/0);
  }
}

TEST_CASE("a broadcast operand's gradient sums over the batch (serial path) while the other is threaded") {
  TwoThreads threads;
  const std::int64_t batch = 5, m = 36, k = 30, n = 34;
  REQUIRE(engine::batch_in_parallel(batch, m, n, k, true));
  CHECK_FALSE(engine::batch_in_parallel(batch, m, n, k, false));
  Generator g(5);
  Tensor a = Tensor::normal({1, m, k}, 0, 1, g, DType::f64); // shared by every batch element
  Tensor b = Tensor::normal({batch, k, n}, 0, 1, g, DType::f64);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor c = ops::matmul(a, b);
  check_close(c.to_vector(), loops_bmm(a.to_vector(), 1, b.to_vector(), batch, batch, m, k, n), 1e-11, /*rtol=*/0);
  ops::sum(c).backward();
  // d(sum C)/dA = sum_b 1 B_b^T: every row of dA is the row sums of B, summed over the batch
  std::vector<double> da(static_cast<std::size_t>(m * k), 0.0), db(static_cast<std::size_t>(batch * k * n), 0.0);
  const auto bv = b.to_vector(), av = a.to_vector();
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t t = 0; t < k; ++t) {
      double row = 0;
      for (std::int64_t col = 0; col < n; ++col) row += bv[static_cast<std::size_t>((i * k + t) * n + col)];
      for (std::int64_t r = 0; r < m; ++r) da[static_cast<std::size_t>(r * k + t)] += row;
    }
  // d(sum C)/dB_b = A^T 1: column sums of A, the same for every batch element
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t t = 0; t < k; ++t) {
      double col = 0;
      for (std::int64_t r = 0; r < m; ++r) col += av[static_cast<std::size_t>(r * k + t)];
      for (std::int64_t j = 0; j < n; ++j) db[static_cast<std::size_t>((i * k + t) * n + j)] = col;
    }
  check_close(a.grad().to_vector(), da, 1e-10, /*rtol=*/0);
  check_close(b.grad().to_vector(), db, 1e-10, /*rtol=*/0);
}

TEST_CASE("the threaded batch restores the BLAS thread count") {
  TwoThreads threads;
  Generator g(2);
  Tensor a = Tensor::normal({4, 40, 40}, 0, 1, g), b = Tensor::normal({4, 40, 40}, 0, 1, g);
  REQUIRE(engine::batch_in_parallel(4, 40, 40, 40, true));
  (void)ops::matmul(a, b);
  CHECK(openblas_get_num_threads() == 2);
}

TEST_CASE("gemm split over threads (row or column blocks) equals one BLAS call, all four transpose flags") {
  TwoThreads threads;
  // (m, n, k): rows split (m >= n), columns split (m < n); odd sizes so blocks are uneven
  const std::int64_t shapes[][3] = {{203, 37, 45}, {29, 301, 41}, {64, 64, 64}};
  for (const auto& sh : shapes) {
    const std::int64_t m = sh[0], n = sh[1], k = sh[2];
    REQUIRE(engine::gemm_split_parts(m, n, k) == 2);
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(flags);
      // operands stored with a padded leading dimension, as views into bigger buffers are
      const std::int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
      Generator g(static_cast<std::uint64_t>(m * 131 + flags));
      std::vector<double> a(static_cast<std::size_t>((ta ? k : m) * lda)), b(static_cast<std::size_t>((tb ? n : k) * ldb));
      for (auto& v : a) v = g.normal();
      for (auto& v : b) v = g.normal();
      std::vector<double> c0(static_cast<std::size_t>(m * ldc)), c1;
      for (auto& v : c0) v = g.normal();
      c1 = c0;
      engine::gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, c0.data(), ldc);     // split
      engine::blas_gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, c1.data(), ldc); // one call
      double worst = 0;
      for (std::size_t i = 0; i < c0.size(); ++i) worst = std::max(worst, std::fabs(c0[i] - c1[i]));
      CHECK(worst <= 1e-12); // padding columns included: untouched by both
    }
  }
}

TEST_CASE("small_gemm (tiny per-head products) equals BLAS: sizes with and without a compiled-in width") {
  // n = 8, 16, 32 take the fixed-width paths, the others the generic one
  const std::int64_t shapes[][3] = {{16, 16, 16}, {7, 8, 3}, {32, 32, 32}, {5, 13, 29}, {1, 1, 1}, {32, 17, 1}};
  for (const auto& sh : shapes) {
    const std::int64_t m = sh[0], n = sh[1], k = sh[2];
    for (int flags = 0; flags < 8; ++flags) {
      const bool ta = flags & 1, tb = flags & 2, with_beta = flags & 4;
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      CAPTURE(flags);
      const std::int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
      Generator g(static_cast<std::uint64_t>(m * 7 + n * 11 + k * 13 + flags));
      std::vector<double> a(static_cast<std::size_t>((ta ? k : m) * lda)), b(static_cast<std::size_t>((tb ? n : k) * ldb));
      std::vector<double> c0(static_cast<std::size_t>(m * ldc));
      for (auto& v : a) v = g.normal();
      for (auto& v : b) v = g.normal();
      for (auto& v : c0) v = g.normal();
      const double beta = with_beta ? 0.3 : 0.0;
      std::vector<double> c1 = c0;
      engine::small_gemm(ta, tb, m, n, k, -0.8, a.data(), lda, b.data(), ldb, beta, c0.data(), ldc);
      engine::blas_gemm(ta, tb, m, n, k, -0.8, a.data(), lda, b.data(), ldb, beta, c1.data(), ldc);
      double worst = 0;
      for (std::size_t i = 0; i < c0.size(); ++i) worst = std::max(worst, std::fabs(c0[i] - c1[i]));
      CHECK(worst <= 1e-12);
      // float, through the CPU-specific clone
      std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(c1.size(), 0.0f), cf1;
      for (std::size_t i = 0; i < cf.size(); ++i) cf[i] = static_cast<float>(i % 7) - 3.0f;
      cf1 = cf;
      engine::small_gemm(ta, tb, m, n, k, -0.8f, af.data(), lda, bf.data(), ldb, static_cast<float>(beta), cf.data(), ldc);
      engine::blas_gemm(ta, tb, m, n, k, -0.8f, af.data(), lda, bf.data(), ldb, static_cast<float>(beta), cf1.data(), ldc);
      float worst_f = 0;
      for (std::size_t i = 0; i < cf.size(); ++i) worst_f = std::max(worst_f, std::fabs(cf[i] - cf1[i]));
      // a different summation order than BLAS: |diff| <= 2 k u sum|a b| (k <= 32, u = 6e-8);
      // 2e-5 is that bound for the seeded N(0,1) data here, not a loosened tolerance
      CHECK(worst_f <= 2e-5f);
    }
  }
}

TEST_CASE("attention-sized batched matmul (16 x 16 heads) over threads equals plain loops, with gradients") {
  TwoThreads threads;
  const std::int64_t batch = 64, T = 16, dh = 16;
  REQUIRE(engine::small_batch_in_parallel(batch, T, T, dh, true));
  Generator g(21);
  Tensor q = Tensor::normal({batch, T, dh}, 0, 1, g, DType::f64), k = Tensor::normal({batch, T, dh}, 0, 1, g, DType::f64);
  q.set_requires_grad(true);
  k.set_requires_grad(true);
  Tensor s = ops::matmul(q, k.transpose(1, 2), 0.25);
  std::vector<double> want = loops_bmm(q.to_vector(), batch, transposed(k), batch, batch, T, dh, T);
  for (auto& w : want) w *= 0.25;
  check_close(s.to_vector(), want, 1e-12, /*rtol=*/0);
  Tensor G = Tensor::normal({batch, T, T}, 0, 1, g, DType::f64);
  ops::sum(ops::mul(s, G)).backward();
  // dQ = 0.25 G K; dK = 0.25 G^T Q
  std::vector<double> dq = loops_bmm(G.to_vector(), batch, k.detach().to_vector(), batch, batch, T, T, dh);
  std::vector<double> dk = loops_bmm(transposed(G), batch, q.detach().to_vector(), batch, batch, T, T, dh);
  for (auto& v : dq) v *= 0.25;
  for (auto& v : dk) v *= 0.25;
  check_close(q.grad().to_vector(), dq, 1e-12, /*rtol=*/0);
  check_close(k.grad().to_vector(), dk, 1e-12, /*rtol=*/0);
}
