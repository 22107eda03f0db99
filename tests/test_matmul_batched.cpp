// test_matmul_batched.cpp - the batched matmul path that spreads per-head gemms over OpenMP
// threads (kernels/gemm_batched.hpp): same results as plain loops, forward and backward, with
// transposed operands and with a broadcast operand (whose gradient must stay serial).
// The shapes are chosen above the parallel threshold, and the test asserts that they are, so the
// threaded path is the one under test.
#include <doctest/doctest.h>

#include <cblas.h>
#include <omp.h>

#include "framework/autograd.hpp"
#include "framework/kernels/gemm_batched.hpp"
#include "framework/ops/ops.hpp"
#include "framework/random.hpp"

using namespace headgrad;

namespace {

// C[b] = A[b] @ B[b] by plain loops over row-major (batch, m, k) and (batch, k, n) values;
// a batch extent of 1 broadcasts.
std::vector<double> loops_bmm(const std::vector<double>& a, std::int64_t ba, const std::vector<double>& b,
                              std::int64_t bb, std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n) {
  std::vector<double> c(static_cast<std::size_t>(batch * m * n), 0.0);
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t col = 0; col < n; ++col) {
        double s = 0;
        for (std::int64_t t = 0; t < k; ++t)
          s += a[static_cast<std::size_t>(((ba == 1 ? 0 : i) * m + r) * k + t)] *
               b[static_cast<std::size_t>(((bb == 1 ? 0 : i) * k + t) * n + col)];
        c[static_cast<std::size_t>((i * m + r) * n + col)] = s;
      }
  return c;
}

// The values of x transposed in its last two axes, as a row-major vector.
std::vector<double> transposed(const Tensor& x) { return x.transpose(-2, -1).contiguous().to_vector(); }

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  CHECK(worst <= tol);
}

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
  REQUIRE(kernels::batch_in_parallel(batch, T, T, dh, true));
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(dt));
    const double tol = dt == DType::f64 ? 1e-11 : 2e-4;
    Generator g(11);
    Tensor q = Tensor::normal({batch, T, dh}, 0, 1, g, dt), k = Tensor::normal({batch, T, dh}, 0, 1, g, dt);
    Tensor v = Tensor::normal({batch, T, dh}, 0, 1, g, dt);
    for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
    Tensor s = ops::matmul(q, k.transpose(1, 2)); // (batch, T, T): B read through the Trans flag
    Tensor o = ops::matmul(s, v);                 // (batch, T, dh)
    const auto qv = q.to_vector(), kt = transposed(k), vv = v.to_vector();
    const auto s_want = loops_bmm(qv, batch, kt, batch, batch, T, dh, T);
    check_close(s.to_vector(), s_want, tol);
    check_close(o.to_vector(), loops_bmm(s_want, batch, vv, batch, batch, T, T, dh), tol * 10);

    // loss = sum(o * G): dO = G; dS = G V^T; dV = S^T G; dQ = dS K; dK = dS^T Q
    Tensor G = Tensor::normal({batch, T, dh}, 0, 1, g, dt);
    ops::sum(ops::mul(o, G)).backward();
    const auto gv = G.to_vector();
    const auto ds = loops_bmm(gv, batch, transposed(v), batch, batch, T, dh, T);
    check_close(v.grad().to_vector(), loops_bmm(transposed(s.detach()), batch, gv, batch, batch, T, T, dh), tol * 10);
    check_close(q.grad().to_vector(), loops_bmm(ds, batch, k.detach().to_vector(), batch, batch, T, T, dh), tol * 10);
    Tensor dsT = Tensor::from(ds, {batch, T, T}, DType::f64);
    check_close(k.grad().to_vector(), loops_bmm(transposed(dsT), batch, qv, batch, batch, T, T, dh), tol * 10);
  }
}

TEST_CASE("a broadcast operand's gradient sums over the batch (serial path) while the other is threaded") {
  TwoThreads threads;
  const std::int64_t batch = 5, m = 36, k = 30, n = 34;
  REQUIRE(kernels::batch_in_parallel(batch, m, n, k, true));
  CHECK_FALSE(kernels::batch_in_parallel(batch, m, n, k, false));
  Generator g(5);
  Tensor a = Tensor::normal({1, m, k}, 0, 1, g, DType::f64); // shared by every batch element
  Tensor b = Tensor::normal({batch, k, n}, 0, 1, g, DType::f64);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor c = ops::matmul(a, b);
  check_close(c.to_vector(), loops_bmm(a.to_vector(), 1, b.to_vector(), batch, batch, m, k, n), 1e-11);
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
  check_close(a.grad().to_vector(), da, 1e-10);
  check_close(b.grad().to_vector(), db, 1e-10);
}

TEST_CASE("the threaded batch restores the BLAS thread count") {
  TwoThreads threads;
  Generator g(2);
  Tensor a = Tensor::normal({4, 40, 40}, 0, 1, g), b = Tensor::normal({4, 40, 40}, 0, 1, g);
  REQUIRE(kernels::batch_in_parallel(4, 40, 40, 40, true));
  (void)ops::matmul(a, b);
  CHECK(openblas_get_num_threads() == 2);
}

TEST_CASE("gemm split over threads (row or column blocks) equals one BLAS call, all four transpose flags") {
  TwoThreads threads;
  // (m, n, k): rows split (m >= n), columns split (m < n); odd sizes so blocks are uneven
  const std::int64_t shapes[][3] = {{203, 37, 45}, {29, 301, 41}, {64, 64, 64}};
  for (const auto& sh : shapes) {
    const std::int64_t m = sh[0], n = sh[1], k = sh[2];
    REQUIRE(kernels::gemm_split_parts(m, n, k) == 2);
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
      kernels::gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, c0.data(), ldc);     // split
      kernels::blas_gemm(ta, tb, m, n, k, 0.7, a.data(), lda, b.data(), ldb, 0.3, c1.data(), ldc); // one call
      double worst = 0;
      for (std::size_t i = 0; i < c0.size(); ++i) worst = std::max(worst, std::fabs(c0[i] - c1[i]));
      CHECK(worst <= 1e-12); // padding columns included: untouched by both
    }
  }
}
