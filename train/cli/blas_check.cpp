#include "train/cli/blas_check.hpp"

#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <vector>

#include "framework/engine/kernels/gemm.hpp"
#include "framework/core/random.hpp"

namespace headgrad::cli {

namespace {

template <typename T>
void check_one(Generator& g, bool split, BlasCheckResult& r) {
  const auto dim = [&] { return static_cast<std::int64_t>(1 + g.below(160)); };
  const std::int64_t m = dim(), n = dim(), k = dim();
  const bool ta = g.below(2) != 0, tb = g.below(2) != 0;
  const std::int64_t lda = (ta ? m : k) + static_cast<std::int64_t>(g.below(4));
  const std::int64_t ldb = (tb ? k : n) + static_cast<std::int64_t>(g.below(4));
  const std::int64_t ldc = n + static_cast<std::int64_t>(g.below(4));
  const T alpha = static_cast<T>(g.uniform() * 2 - 1), beta = g.below(3) == 0 ? T(0) : static_cast<T>(g.uniform() * 2 - 1);
  std::vector<T> a(static_cast<std::size_t>((ta ? k : m) * lda)), b(static_cast<std::size_t>((tb ? n : k) * ldb)),
      c(static_cast<std::size_t>(m * ldc));
  for (auto& x : a) x = static_cast<T>(g.normal());
  for (auto& x : b) x = static_cast<T>(g.normal());
  for (auto& x : c) x = static_cast<T>(g.normal());
  const std::vector<T> c0 = c;
  if (split) engine::gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  else engine::blas_gemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
  const long double u = std::numeric_limits<T>::epsilon() / 2;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double ref = 0, mag = 0;
      for (std::int64_t t = 0; t < k; ++t) {
        const long double p = static_cast<long double>(a[static_cast<std::size_t>(ta ? t * lda + i : i * lda + t)]) *
                              b[static_cast<std::size_t>(tb ? j * ldb + t : t * ldb + j)];
        ref += p;
        mag += std::fabs(p);
      }
      const long double cij0 = c0[static_cast<std::size_t>(i * ldc + j)];
      const long double want = alpha * ref + (beta == T(0) ? 0.0L : beta * cij0);
      const long double bound =
          2 * (k + 2) * u * (std::fabs(static_cast<long double>(alpha)) * mag + std::fabs(beta * cij0)) +
          std::numeric_limits<T>::denorm_min();
      const long double err = std::fabs(c[static_cast<std::size_t>(i * ldc + j)] - want);
      const double ratio = static_cast<double>(err / bound);
      if (!(ratio <= r.worst_ratio)) { // also catches NaN
        r.worst_ratio = std::isnan(ratio) ? std::numeric_limits<double>::infinity() : ratio;
        r.worst_case = fmt::format("{}gemm {}{} {}x{}x{}{} at ({}, {})", sizeof(T) == 4 ? 's' : 'd', ta ? 'T' : 'N',
                                   tb ? 'T' : 'N', m, n, k, split ? " split over threads" : "", i, j);
      }
    }
  // the padding columns of C must be untouched
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = n; j < ldc; ++j)
      if (c[static_cast<std::size_t>(i * ldc + j)] != c0[static_cast<std::size_t>(i * ldc + j)]) {
        r.worst_ratio = std::numeric_limits<double>::infinity();
        r.worst_case = fmt::format("padding of C overwritten ({}x{}x{})", m, n, k);
      }
}

} // namespace

BlasCheckResult check_blas(int shapes, std::uint64_t seed) {
  BlasCheckResult r;
  Generator g(seed);
  for (int s = 0; s < shapes; ++s) {
    for (bool split : {false, true}) {
      check_one<float>(g, split, r);
      check_one<double>(g, split, r);
    }
    ++r.gemms;
  }
  return r;
}

} // namespace headgrad::cli
