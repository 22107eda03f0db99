// test_kernels_backward.cpp - the loops the ops' backward closures run, each against its plain
// definition: the book's own (the gradient sum behind Node::add_to_grad, scatter-adds, the
// elementwise maps, framework/core/strided.hpp and framework/ops/), matmul's gradients of
// broadcast batches, and the engine's kernels where the book's loop is the reference (layer norm's
// threaded backward, column sums) or the semantics are the point (cross-entropy, the masked softmax
// backward). Every loop that takes `first_write` is checked both ways: on a first write the buffer
// starts as NaN (uninitialised memory must never be read), otherwise it starts as 1 and the result
// must be 1 + the contribution.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <omp.h>

#include "framework/core/autograd.hpp"
#include "framework/core/strided.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/parallel.hpp"
#include "framework/ops/map.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/scatter.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::kNaN;
using test_support::randn;

namespace {

using V = std::vector<double>;

// A destination buffer as a kernel finds it: NaN on a first write (never to be read), 1 otherwise.
std::vector<double> start_buffer(std::int64_t n, bool first_write) {
  return std::vector<double>(static_cast<std::size_t>(n), first_write ? kNaN : 1.0);
}

// What the buffer must hold after adding `contribution`: itself, or 1 + it.
std::vector<double> expected(std::vector<double> contribution, bool first_write) {
  if (!first_write)
    for (double& v : contribution) v += 1.0;
  return contribution;
}

// Runs f with n OpenMP threads, restoring the setting afterwards.
template <typename F> void with_threads(int n, F&& f) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(before);
}

} // namespace

TEST_CASE("sum_into: same shape, contiguous - assign, add, scale, and dst being src itself") {
  for (bool first : {true, false}) {
    const std::vector<double> src = randn({2, 3}, 1).to_vector();
    std::vector<double> dst = start_buffer(6, first);
    book::sum_into<double>(dst.data(), first, {2, 3}, src.data(), {2, 3}, {3, 1}, -2.0);
    std::vector<double> want = src;
    for (double& v : want) v *= -2.0;
    check_close(dst, expected(want, first), 0);
  }
  // x + x: x's gradient is dy's own buffer, and dy is then added to it once more
  std::vector<double> g = {1, 2, 3};
  book::sum_into<double>(g.data(), false, {3}, g.data(), {3}, {1}, 1.0);
  check_close(g, {2, 4, 6}, 0);
}

TEST_CASE("sum_into: same shape, strided source (a permuted view) - walks the source, lands right") {
  // src holds (2, 3, 4) values; read as its transpose (4, 3, 2) view
  const Tensor x = randn({2, 3, 4}, 2);
  const Tensor v = x.permute({2, 1, 0});
  const std::vector<double> want = v.contiguous().to_vector();
  for (bool first : {true, false}) {
    std::vector<double> dst = start_buffer(24, first);
    book::sum_into<double>(dst.data(), first, v.shape(), v.data<double>(), v.shape(), v.strides(), 1.0);
    check_close(dst, expected(want, first), 0);
  }
}

TEST_CASE("sum_into: broadcast - sums over the broadcast axes, leading ones included") {
  const Tensor src = randn({2, 4, 3}, 3);
  const auto s = src.to_vector();
  auto at = [&](int i, int j, int k) { return s[static_cast<std::size_t>((i * 4 + j) * 3 + k)]; };
  for (bool first : {true, false}) {
    // (3): summed over the two leading axes
    std::vector<double> d1 = start_buffer(3, first), w1(3, 0.0);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k) w1[static_cast<std::size_t>(k)] += at(i, j, k);
    book::sum_into<double>(d1.data(), first, {3}, src.data<double>(), src.shape(), src.strides(), 1.0);
    check_close(d1, expected(w1, first), 1e-14);
    // (2, 4, 1): summed over the last axis (each row lands on one element)
    std::vector<double> d2 = start_buffer(8, first), w2(8, 0.0);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 3; ++k) w2[static_cast<std::size_t>(i * 4 + j)] += at(i, j, k);
    book::sum_into<double>(d2.data(), first, {2, 4, 1}, src.data<double>(), src.shape(), src.strides(), 1.0);
    check_close(d2, expected(w2, first), 1e-14);
  }
}

TEST_CASE("matmul's gradients: broadcast batches sum into a shared operand's gradient, fold too") {
  struct Case {
    Dims a, b;
    Dims batch;
  };
  for (const Case& c : {Case{{2, 1, 3, 4}, {5, 4, 2}, {2, 5}}, Case{{2, 3, 4}, {4, 5}, {2}}, Case{{3, 4}, {2, 4, 5}, {2}}}) {
    Tensor A = randn(c.a, 4), B = randn(c.b, 5);
    struct {
      Dims batch;
      std::int64_t M, K, N;
    } const p{c.batch, c.a[c.a.size() - 2], c.a.back(), c.b.back()};
    Dims cs = p.batch;
    cs.push_back(p.M);
    cs.push_back(p.N);
    const Tensor dC = randn(cs, 6);
    // Reference: broadcast both to the full batch, per-element products, summed back.
    Dims ab = p.batch, bb = p.batch;
    ab.push_back(p.M), ab.push_back(p.K), bb.push_back(p.K), bb.push_back(p.N);
    const std::int64_t nb = p.batch.numel();
    std::vector<double> da_full(static_cast<std::size_t>(nb * p.M * p.K)), db_full(static_cast<std::size_t>(nb * p.K * p.N));
    const auto a_full = make_view(A, ab, broadcast_strides(A.shape(), A.strides(), ab), 0).contiguous().to_vector();
    const auto b_full = make_view(B, bb, broadcast_strides(B.shape(), B.strides(), bb), 0).contiguous().to_vector();
    const auto dc = dC.to_vector();
    for (std::int64_t i = 0; i < nb; ++i)
      for (std::int64_t m = 0; m < p.M; ++m)
        for (std::int64_t k = 0; k < p.K; ++k)
          for (std::int64_t n = 0; n < p.N; ++n) {
            const double g = 0.5 * dc[static_cast<std::size_t>((i * p.M + m) * p.N + n)];
            da_full[static_cast<std::size_t>((i * p.M + m) * p.K + k)] += g * b_full[static_cast<std::size_t>((i * p.K + k) * p.N + n)];
            db_full[static_cast<std::size_t>((i * p.K + k) * p.N + n)] += g * a_full[static_cast<std::size_t>((i * p.M + m) * p.K + k)];
          }
    std::vector<double> want_a(static_cast<std::size_t>(A.numel()), 0.0), want_b(static_cast<std::size_t>(B.numel()), 0.0);
    book::sum_into<double>(want_a.data(), true, A.shape(), da_full.data(), ab, contiguous_strides(ab), 1.0);
    book::sum_into<double>(want_b.data(), true, B.shape(), db_full.data(), bb, contiguous_strides(bb), 1.0);
    // the op's backward: its first write (the leaves have no gradient yet), then adding to it
    A.set_requires_grad();
    B.set_requires_grad();
    const Tensor C = ops::matmul(A, B, 0.5);
    for (bool first : {true, false}) {
      INFO("A ", c.a.str(), " @ B ", c.b.str(), (first ? ", first write" : ", adding"));
      C.backward(dC, /*retain_graph=*/true);
      std::vector<double> twice_a = want_a, twice_b = want_b;
      for (double& v : twice_a) v *= 2;
      for (double& v : twice_b) v *= 2;
      check_close(A.grad().to_vector(), first ? want_a : twice_a, 1e-12);
      check_close(B.grad().to_vector(), first ? want_b : twice_b, 1e-12);
    }
  }
}

TEST_CASE("layer_norm_backward: against the book's loop, any subset of outputs, 1 and 2 threads") {
  // 512 x 128 reaches the threading threshold (rows * D * 4 >= 2^18)
  const std::int64_t rows = 512, D = 128;
  REQUIRE(engine::worth_threads(rows * D, 4));
  const Tensor x = randn({rows, D}, 7), w = randn({D}, 8), b = randn({D}, 9), dy = randn({rows, D}, 10);
  std::vector<double> y(static_cast<std::size_t>(rows * D)), stats(static_cast<std::size_t>(2 * rows));
  kernels::layer_norm_forward<double>(y.data(), stats.data(), x.data<double>(), w.data<double>(), b.data<double>(), rows,
                                      D, 1e-5);
  // reference: the book's loop, the VJP of its comment
  std::vector<double> wdx(static_cast<std::size_t>(rows * D)), wdw(static_cast<std::size_t>(D)),
      wdb(static_cast<std::size_t>(D));
  book::layer_norm_backward<double>(wdx.data(), true, wdw.data(), true, wdb.data(), true, dy.data<double>(),
                                    x.data<double>(), w.data<double>(), stats.data(), rows, D);
  for (int threads : {1, 2})
    for (bool first : {true, false}) {
      INFO(threads, " threads", (first ? ", first write" : ", adding"));
      std::vector<double> dx = start_buffer(rows * D, first), dw = start_buffer(D, first), db = start_buffer(D, first);
      with_threads(threads, [&] {
        kernels::layer_norm_backward<double>(dx.data(), first, dw.data(), first, db.data(), first, dy.data<double>(),
                                             x.data<double>(), w.data<double>(), stats.data(), rows, D);
      });
      check_close(dx, expected(wdx, first), 1e-12);
      check_close(dw, expected(wdw, first), 1e-11);
      check_close(db, expected(wdb, first), 1e-11);
      // only dx (a frozen affine), only dw and db (a frozen input)
      std::vector<double> dx2 = start_buffer(rows * D, first), dw2 = start_buffer(D, first), db2 = start_buffer(D, first);
      with_threads(threads, [&] {
        kernels::layer_norm_backward<double>(dx2.data(), first, nullptr, false, nullptr, false, dy.data<double>(),
                                             x.data<double>(), w.data<double>(), stats.data(), rows, D);
        kernels::layer_norm_backward<double>(nullptr, false, dw2.data(), first, db2.data(), first, dy.data<double>(),
                                             x.data<double>(), w.data<double>(), stats.data(), rows, D);
      });
      check_close(dx2, dx, 0);
      check_close(dw2, dw, 0);
      check_close(db2, db, 0);
    }
}

TEST_CASE("column_sums: the bias gradient, the same bits with 1 and 2 threads") {
  const std::int64_t rows = 1024, cols = 300; // above the threading threshold, a partial last block
  REQUIRE(engine::worth_threads(rows * cols));
  const Tensor x = randn({rows, cols}, 11);
  std::vector<double> want(static_cast<std::size_t>(cols));
  book::column_sums<double>(want.data(), true, x.data<double>(), rows, cols);
  std::vector<double> one;
  for (int threads : {1, 2})
    for (bool first : {true, false}) {
      std::vector<double> out = start_buffer(cols, first);
      with_threads(threads, [&] { kernels::column_sums<double>(out.data(), first, x.data<double>(), rows, cols); });
      check_close(out, expected(want, first), 1e-12);
      if (first && threads == 1) one = out;
      if (first && threads == 2) check_close(out, one, 0);
    }
}

TEST_CASE("index_add and gather_add: repeated indices sum, unpicked rows get zero on a first write") {
  // x (outer 2, len 3, inner 2); index_select picks rows [2, 0, 2]
  const std::vector<std::int64_t> idx = {2, 0, 2};
  const std::vector<double> dy = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; // (2, 3, 2)
  for (bool first : {true, false}) {
    std::vector<double> dx = start_buffer(12, first);
    book::index_add<double>(dx.data(), first, dy.data(), idx.data(), 2, 3, 3, 2);
    check_close(dx, expected({3, 4, 0, 0, 1 + 5, 2 + 6, 9, 10, 0, 0, 7 + 11, 8 + 12}, first), 0);
  }
  // gather with count 1 is max's backward: (outer 2, len 3, inner 2), argmax per (o, i)
  const std::vector<std::int64_t> arg = {1, 2, 0, 1};
  const std::vector<double> g = {1, 2, 3, 4};
  for (bool first : {true, false}) {
    std::vector<double> dx = start_buffer(12, first);
    book::gather_add<double>(dx.data(), first, g.data(), arg.data(), 2, 3, 1, 2);
    check_close(dx, expected({0, 0, 1, 0, 0, 2, 3, 0, 0, 4, 0, 0}, first), 0);
  }
}

TEST_CASE("cross_entropy kernels: loss of counted rows only, gradient p - onehot scaled") {
  const std::vector<double> x = {2, 0, 0, 0, 1, 0, 5, 5, 5}; // 3 rows, V 3
  const std::vector<std::int64_t> target = {0, 1, 2};
  const std::vector<double> counted = {1, 1, 0}; // row weights: 0 = not counted
  std::vector<double> p(9);
  const double total =
      kernels::cross_entropy_forward<double>(p.data(), nullptr, x.data(), target.data(), counted.data(), 3, 3);
  auto lse = [&](int r) { return std::log(std::exp(x[3 * r]) + std::exp(x[3 * r + 1]) + std::exp(x[3 * r + 2])); };
  CHECK(total == doctest::Approx(lse(0) - 2 + lse(1) - 1).epsilon(1e-14));
  for (bool first : {true, false}) {
    std::vector<double> dx = start_buffer(9, first);
    const std::vector<double> row_scale = {0.5, 0.5, 0}; // 0.5 times each row's weight
    kernels::cross_entropy_backward<double>(dx.data(), first, p.data(), target.data(), row_scale.data(), 3, 3);
    std::vector<double> want = {0.5 * (p[0] - 1), 0.5 * p[1], 0.5 * p[2], 0.5 * p[3], 0.5 * (p[4] - 1), 0.5 * p[5], 0, 0, 0};
    check_close(dx, expected(want, first), 1e-15);
  }
}

TEST_CASE("map_backward and zip_broadcast: the elementwise loops") {
  const std::vector<double> x = {-1, 2, 3}, y = {1, 4, 9}, dy = {1, 1, 2};
  for (bool first : {true, false}) {
    std::vector<double> dx = start_buffer(3, first);
    book::map_backward<double>(dx.data(), first, dy.data(), x.data(), y.data(), 3,
                               [](double xv, double) { return 2 * xv; }); // y = x^2
    check_close(dx, expected({-2, 4, 12}, first), 0);
  }
  // (2, 3) + (3): b broadcast over rows, and (2, 1) * (1, 3): an outer product
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30};
  std::vector<double> out(6);
  book::zip_broadcast<double>(out.data(), a.data(), {3, 1}, b.data(), {0, 1}, {2, 3},
                              [](double u, double v) { return u + v; });
  check_close(out, {11, 22, 33, 14, 25, 36}, 0);
  const std::vector<double> col = {1, 2};
  book::zip_broadcast<double>(out.data(), col.data(), {1, 0}, b.data(), {0, 1}, {2, 3},
                              [](double u, double v) { return u * v; });
  check_close(out, {10, 20, 30, 20, 40, 60}, 0);
}

TEST_CASE("softmax_backward with lengths and a keep mask: y (dy - dot) on kept keys, exactly 0 on masked ones") {
  // rows (cols 7): lengths 7, 3, 0, 5, 7 and a keep mask; dy with a NaN at a masked key of row 3
  // and an inf at a kept one of row 4 (their dots are then NaN and inf: the masked loop)
  const std::int64_t rows = 5, cols = 7;
  const std::vector<std::int64_t> lens = {7, 3, 0, 5, 7};
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(rows * cols), 1);
  keep[1] = keep[3 * cols + 2] = keep[4 * cols + 6] = 0;
  const Tensor x = randn({rows, cols}, 41);
  std::vector<double> y(static_cast<std::size_t>(rows * cols));
  kernels::softmax_forward<double>(y.data(), x.data<double>(), lens.data(), keep.data(), rows, cols);
  std::vector<double> dy = randn({rows, cols}, 42).to_vector();
  dy[3 * cols + 6] = kNaN;
  dy[4 * cols + 3] = std::numeric_limits<double>::infinity();
  // the book's loop, the plain definition
  std::vector<double> want(static_cast<std::size_t>(rows * cols));
  book::softmax_backward<double>(want.data(), true, dy.data(), y.data(), lens.data(), keep.data(), rows, cols);
  for (bool first : {true, false}) {
    CAPTURE(first);
    std::vector<double> dx = start_buffer(rows * cols, first);
    kernels::softmax_backward<double>(dx.data(), first, dy.data(), y.data(), lens.data(), keep.data(), rows, cols);
    const std::vector<double> e = expected(want, first);
    for (std::size_t i = 0; i < dx.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(e[i])) CHECK(std::isnan(dx[i]));
      else if (std::isinf(e[i])) CHECK(dx[i] == e[i]);
      else CHECK(dx[i] == doctest::Approx(e[i]).epsilon(1e-14));
    }
  }
  CHECK(std::isnan(want[3 * cols]));  // a kept key of a row whose dot is NaN
  CHECK(want[3 * cols + 6] == 0.0);   // its masked keys: 0
}

TEST_CASE("where_broadcast: picks through broadcast strides") {
  const bool cond[2] = {true, false};          // (2, 1)
  const V a = {1, 2, 3}, b = {10, 20, 30, 40, 50, 60}; // (3) and (2, 3)
  V y(6);
  book::where_broadcast<double>(y.data(), cond, {1, 0}, a.data(), {0, 1}, b.data(), {3, 1}, {2, 3});
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

TEST_CASE("first_write helpers: a first write ignores what the buffer holds, a later one adds") {
  for (const bool first_write : {true, false}) {
    CAPTURE(first_write);
    std::vector<double> dst = start_buffer(3, first_write);
    const std::vector<double> g = {0.5, -2.0, 0.0};
    for (std::size_t i = 0; i < g.size(); ++i) store_grad(dst[i], g[i], first_write);
    check_close(dst, expected(g, first_write), 0, 0);

    // C (2x2) = A (2x3) B (3x2) through the gemm, C starting as the buffer does
    const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 0, 1, 1, 1};
    std::vector<double> c = start_buffer(4, first_write);
    kernels::gemm<double>(false, false, 2, 2, 3, 1.0, a.data(), 3, b.data(), 2,
                          first_write_beta<double>(first_write), c.data(), 2);
    check_close(c, expected({4, 5, 10, 11}, first_write), 0, 0);
  }
}
