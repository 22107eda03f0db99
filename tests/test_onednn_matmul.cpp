// test_onednn_matmul.cpp - oneDNN's matmul behind a cblas-shaped call
// (framework/engine/blas/onednn_matmul.hpp), float32 and bf16, against a plain loop: every
// transpose combination, sizes 1, 7 and 129, leading dimensions wider than the operands (their
// gaps hold NaN, so reading one shows), alpha, beta 0 over a C full of NaN, beta 1; the
// primitive cache; row blocks giving the whole product's bits; calls from several threads; and
// the refusal on a CPU without bf16 (simulated).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/core/random.hpp"
#include "framework/engine/blas/bf16.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/blas/onednn_matmul.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using blas::bf16;
using blas::GemmInputs;
using test_support::ScopedEnv;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// One gemm's operands as stored: A is (ta ? k x m : m x k) with leading dimension lda, B
// (tb ? n x k : k x n) with ldb, C m x n with ldc; every element past a row's width is NaN.
struct Problem {
  bool ta, tb;
  std::int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  std::vector<float> a, b, c0; // c0: C before the call
  std::vector<bf16> a16, b16;

  Problem(bool ta_, bool tb_, std::int64_t m_, std::int64_t n_, std::int64_t k_, std::int64_t pad, float alpha_,
          float beta_, Generator& gen)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_), lda((ta_ ? m_ : k_) + pad), ldb((tb_ ? k_ : n_) + pad), ldc(n_ + pad),
        alpha(alpha_), beta(beta_) {
    auto fill = [&](std::vector<float>& v, std::int64_t rows, std::int64_t width, std::int64_t ld) {
      v.assign(static_cast<std::size_t>(rows * ld), kNaN);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < width; ++j) v[static_cast<std::size_t>(r * ld + j)] = static_cast<float>(gen.uniform() * 2 - 1);
    };
    fill(a, ta ? k : m, ta ? m : k, lda);
    fill(b, tb ? n : k, tb ? k : n, ldb);
    fill(c0, m, n, ldc);
    a16.resize(a.size());
    b16.resize(b.size());
    blas::to_bf16(a16.data(), a.data(), static_cast<std::int64_t>(a.size()));
    blas::to_bf16(b16.data(), b.data(), static_cast<std::int64_t>(b.size()));
  }
  float a_at(std::int64_t i, std::int64_t p, bool rounded) const { // op(A)[i][p]
    const std::size_t at = static_cast<std::size_t>(ta ? p * lda + i : i * lda + p);
    return rounded ? blas::to_float(a16[at]) : a[at];
  }
  float b_at(std::int64_t p, std::int64_t j, bool rounded) const { // op(B)[p][j]
    const std::size_t at = static_cast<std::size_t>(tb ? j * ldb + p : p * ldb + j);
    return rounded ? blas::to_float(b16[at]) : b[at];
  }

  // Every element of `c` (C after the call) against alpha sum_p op(A)[i][p] op(B)[p][j] + beta C0
  // summed in double over the inputs (bf16-rounded when `rounded`). Tolerance: float32's error
  // bound for a sum of k products, k u sum |terms| (Higham, "Accuracy and Stability of Numerical
  // Algorithms", 3.1), plus the roundings of alpha and beta. Past a row's width, c must be
  // untouched. Returns how many elements failed.
  int compare(const std::vector<float>& c, bool rounded, bool report = true) const {
    const double u = std::ldexp(1.0, -24);
    int failures = 0;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < ldc; ++j) {
        const std::size_t at = static_cast<std::size_t>(i * ldc + j);
        if (j >= n) {
          if (!std::isnan(c[at])) ++failures; // the gap still holds its NaN
          continue;
        }
        double sum = 0, size = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double t = static_cast<double>(a_at(i, p, rounded)) * static_cast<double>(b_at(p, j, rounded));
          sum += t;
          size += std::abs(t);
        }
        const double c_before = beta == 0 ? 0.0 : static_cast<double>(beta) * c0[at];
        const double want = static_cast<double>(alpha) * sum + c_before;
        const double tol = static_cast<double>(k + 3) * u * (std::abs(static_cast<double>(alpha)) * size + std::abs(c_before)) + 1e-30;
        const double got = c[at];
        if (!(std::abs(got - want) <= tol)) {
          if (report && failures < 3) MESSAGE("C[", i, "][", j, "] = ", got, ", want ", want, " +- ", tol);
          ++failures;
        }
      }
    return failures;
  }
  std::string str() const {
    return std::string(ta ? "T" : "N") + (tb ? "T" : "N") + " m " + std::to_string(m) + " n " + std::to_string(n) +
           " k " + std::to_string(k) + " lda " + std::to_string(lda) + " ldb " + std::to_string(ldb) + " ldc " +
           std::to_string(ldc) + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta);
  }
  // C after each kind of call. beta 0 starts from a C full of NaN (an uninitialised gradient).
  std::vector<float> start_c() const {
    if (beta != 0) return c0;
    std::vector<float> c(c0.size(), kNaN);
    return c;
  }
  std::vector<float> run_f32() const {
    std::vector<float> c = start_c();
    blas::onednn_sgemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
    return c;
  }
  std::vector<float> run_bf16() const {
    std::vector<float> c = start_c();
    blas::onednn_bf16_gemm(ta, tb, m, n, k, alpha, a16.data(), lda, b16.data(), ldb, beta, c.data(), ldc);
    return c;
  }
  std::vector<float> run_bf16_from_f32() const {
    std::vector<float> c = start_c();
    blas::onednn_bf16_gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
    return c;
  }
};

// Calls `check` on each of the 216 problems both gemm tests run, drawn from `gen` in this order:
// every transpose, m, n and k in {1, 7, 129}, alpha 1 or 0.5 (by the sizes' parity), beta 0 and 1,
// leading dimensions padded by (m + k) % 3.
template <typename Check> void for_each_problem(Generator& gen, Check&& check) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::int64_t m : {1, 7, 129})
        for (std::int64_t n : {1, 7, 129})
          for (std::int64_t k : {1, 7, 129}) {
            const float alpha = (m + n + k) % 2 ? 1.0f : 0.5f;
            for (float beta : {0.0f, 1.0f}) {
              const Problem p(ta, tb, m, n, k, (m + k) % 3, alpha, beta, gen);
              INFO(p.str());
              check(p);
            }
          }
}

} // namespace

TEST_CASE("onednn_sgemm: every transpose, sizes 1, 7 and 129, wide leading dimensions, alpha and beta") {
  Generator gen(11);
  int cases = 0;
  for_each_problem(gen, [&](const Problem& p) {
    CHECK(p.compare(p.run_f32(), false) == 0);
    ++cases;
  });
  CHECK(cases == 216);
}

TEST_CASE("onednn_bf16_gemm: the same cases against the loop over the bf16-rounded inputs") {
  if (!blas::bf16_supported()) {
    Generator gen(1);
    const Problem p(false, true, 7, 7, 7, 0, 1.0f, 0.0f, gen);
    CHECK_THROWS_WITH_AS(p.run_bf16(), blas::bf16_missing().c_str(), std::runtime_error);
    MESSAGE("this CPU has no bf16 matmul: only the refusal was checked (", blas::bf16_missing(), ")");
    return;
  }
  Generator gen(12);
  int far_from_unrounded = 0;
  for_each_problem(gen, [&](const Problem& p) {
    const std::vector<float> c = p.run_bf16();
    CHECK(p.compare(c, true) == 0);
    // negative control: the float32 tolerance around the unrounded inputs' product does not hold
    // (the inputs really were rounded)
    if (p.k == 129 && p.m > 1 && p.n > 1 && p.compare(c, false, false) > 0) ++far_from_unrounded;
    // float inputs rounded by the call: the same product
    CHECK(p.compare(p.run_bf16_from_f32(), true) == 0);
  });
  CHECK(far_from_unrounded == 32); // every case of k = 129 with at least 7 x 7 outputs
}

TEST_CASE("onednn_bf16_gemm of float inputs gives the bits of the bf16 call on the rounded, packed inputs") {
  if (!blas::bf16_supported()) return; // the refusal: the case above
  Generator gen(13);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Problem wide(ta, tb, 96, 80, 64, 5, 1.0f, 0.0f, gen); // the call packs: leading dimension = width
      const Problem packed = [&] {
        Problem q = wide;
        auto pack = [](const std::vector<bf16>& v, std::int64_t rows, std::int64_t width, std::int64_t ld) {
          std::vector<bf16> out;
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < width; ++j) out.push_back(v[static_cast<std::size_t>(r * ld + j)]);
          return out;
        };
        q.a16 = pack(wide.a16, ta ? q.k : q.m, ta ? q.m : q.k, wide.lda);
        q.b16 = pack(wide.b16, tb ? q.n : q.k, tb ? q.k : q.n, wide.ldb);
        q.lda = ta ? q.m : q.k;
        q.ldb = tb ? q.k : q.n;
        return q;
      }();
      const std::vector<float> from_f32 = wide.run_bf16_from_f32(), from_bf16 = packed.run_bf16();
      CHECK(std::memcmp(from_f32.data(), from_bf16.data(), from_f32.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("onednn gemms: beta 0 ignores NaN in C, k = 0 is an empty sum, bad leading dimensions are refused") {
  Generator gen(14);
  const Problem p(false, false, 33, 17, 65, 2, 1.0f, 0.0f, gen);
  const std::vector<float> c = p.run_f32(); // started from all NaN
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) CHECK_FALSE(std::isnan(c[static_cast<std::size_t>(i * p.ldc + j)]));
  CHECK(p.compare(c, false) == 0);

  std::vector<float> c2 = {kNaN, kNaN, 3.0f, 4.0f};
  blas::onednn_sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, c2.data(), 2); // beta 0: zeros
  CHECK(c2 == std::vector<float>{0, 0, 0, 0});
  std::vector<float> c3 = {1.0f, 2.0f, 3.0f, 4.0f};
  blas::onednn_sgemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 1.0f, c3.data(), 2); // beta 1: unchanged
  CHECK(c3 == std::vector<float>{1, 2, 3, 4});
  blas::onednn_sgemm(false, false, 0, 2, 5, 1.0f, nullptr, 5, nullptr, 2, 0.0f, nullptr, 2); // no rows: nothing

  std::vector<float> a(12, 1.0f), b(12, 1.0f), c4(9, 0.0f);
  CHECK_THROWS_AS(blas::onednn_sgemm(false, false, 3, 3, 4, 1.0f, a.data(), 3, b.data(), 3, 0.0f, c4.data(), 3),
                  std::invalid_argument); // lda 3 < k 4
  CHECK_THROWS_AS(blas::onednn_sgemm(false, true, 3, 3, 4, 1.0f, a.data(), 4, b.data(), 3, 0.0f, c4.data(), 3),
                  std::invalid_argument); // B stored transposed (n x k): ldb 3 < k 4
  CHECK_THROWS_AS(blas::onednn_sgemm(false, false, 3, 3, 4, 1.0f, a.data(), 4, b.data(), 3, 0.0f, c4.data(), 2),
                  std::invalid_argument); // ldc 2 < n 3
}

TEST_CASE("onednn gemms: one primitive per shape and form, created once and reused") {
  Generator gen(15);
  blas::onednn_clear_cache();
  const blas::OnednnCacheStats start = blas::onednn_cache_stats();
  CHECK(start.size == 0);
  const Problem p(false, true, 64, 48, 32, 0, 1.0f, 0.0f, gen);
  const std::vector<float> first = p.run_f32();
  const std::vector<float> second = p.run_f32();
  blas::OnednnCacheStats now = blas::onednn_cache_stats();
  CHECK(now.created == start.created + 1); // the same shape twice: one primitive
  CHECK(now.reused == start.reused + 1);
  CHECK(now.size == 1);
  CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0);
  // another alpha, another beta, another type or transpose: a primitive each
  Problem q = p;
  q.alpha = 2.0f;
  (void)q.run_f32();
  q.beta = 1.0f;
  (void)q.run_f32();
  now = blas::onednn_cache_stats();
  CHECK(now.created == start.created + 3);
  CHECK(now.size == 3);
  // cleared: the next call creates again
  blas::onednn_clear_cache();
  CHECK(blas::onednn_cache_stats().size == 0);
  (void)p.run_f32();
  CHECK(blas::onednn_cache_stats().created == start.created + 4);
  CHECK(!blas::onednn_implementation(GemmInputs::f32, false, true, 64, 48, 32, 32, 32, 48).empty());
}

TEST_CASE("onednn gemms: row blocks of C, one call each, give the whole product's bits") {
  // what a caller splitting C over threads relies on (kernels/gemm.hpp splits rows of C): blocks
  // of a training gemm's shape, 768 x 384 x 128 (text model, c_attn), in 2 and 3 row blocks
  Generator gen(16);
  std::vector<GemmInputs> types = {GemmInputs::f32};
  if (blas::bf16_supported()) types.push_back(GemmInputs::bf16);
  for (GemmInputs type : types)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Problem p(ta, tb, 768, 384, 128, 0, 1.0f, 0.0f, gen);
        INFO(std::string(blas::gemm_inputs_name(type)), " ", p.str());
        const std::vector<float> whole = type == GemmInputs::f32 ? p.run_f32() : p.run_bf16();
        for (std::int64_t parts : {2, 3}) {
          std::vector<float> c(whole.size(), kNaN);
          for (std::int64_t q = 0; q < parts; ++q) {
            const std::int64_t lo = p.m * q / parts, hi = p.m * (q + 1) / parts;
            const std::size_t a_off = static_cast<std::size_t>(p.ta ? lo : lo * p.lda);
            if (type == GemmInputs::f32)
              blas::onednn_sgemm(p.ta, p.tb, hi - lo, p.n, p.k, 1.0f, p.a.data() + a_off, p.lda, p.b.data(), p.ldb, 0.0f,
                                 c.data() + lo * p.ldc, p.ldc);
            else
              blas::onednn_bf16_gemm(p.ta, p.tb, hi - lo, p.n, p.k, 1.0f, p.a16.data() + a_off, p.lda, p.b16.data(),
                                     p.ldb, 0.0f, c.data() + lo * p.ldc, p.ldc);
          }
          CHECK(std::memcmp(whole.data(), c.data(), c.size() * sizeof(float)) == 0);
        }
      }
}

TEST_CASE("onednn gemms: calls from several OpenMP threads at once, and the caller's thread count kept") {
  Generator gen(17);
  std::vector<Problem> problems;
  for (int i = 0; i < 4; ++i) problems.emplace_back(i % 2 == 1, i >= 2, 96, 64, 80, 0, 1.0f, 0.0f, gen);
  std::vector<std::vector<float>> serial, parallel(problems.size());
  for (const Problem& p : problems) serial.push_back(p.run_f32());
  const int before = omp_get_max_threads();
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int i = 0; i < 4; ++i) parallel[static_cast<std::size_t>(i)] = problems[static_cast<std::size_t>(i)].run_f32();
  for (std::size_t i = 0; i < problems.size(); ++i)
    CHECK(std::memcmp(serial[i].data(), parallel[i].data(), serial[i].size() * sizeof(float)) == 0);
  omp_set_num_threads(2);
  (void)problems[0].run_f32(); // runs oneDNN on one thread, then gives the setting back
  CHECK(omp_get_max_threads() == 2);
  omp_set_num_threads(before);
}

TEST_CASE("onednn_bf16_gemm refuses a CPU without avx512_bf16 or amx_bf16 (simulated) with bf16_missing's line") {
  Generator gen(18);
  blas::onednn_clear_cache(); // a new primitive must be made, and that is where the check is
  ScopedEnv hook("HEADGRAD_BF16_ASSUME_MISSING", "1");
  const Problem p(false, true, 5, 6, 7, 0, 1.0f, 0.0f, gen);
  CHECK_THROWS_WITH_AS(p.run_bf16(), "this CPU has no avx512_bf16 or amx_bf16: bf16 training needs one of them",
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(p.run_bf16_from_f32(), "this CPU has no avx512_bf16 or amx_bf16: bf16 training needs one of them",
                       std::runtime_error);
  CHECK(p.compare(p.run_f32(), false) == 0); // float32 is unaffected
}
