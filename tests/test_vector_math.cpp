// test_vector_math.cpp - the per-instruction-set kernels (framework/engine/kernels/isa/) on every
// instruction set this CPU runs: exp, log and tanh against libm, GELU and its derivative against a
// long-double reference, the choice of instruction set (runtime/cpu_isa.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/core/random.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/kernel_table.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"

using namespace headgrad;
using runtime::Isa;

namespace {

// Runs body once per instruction set the CPU runs, then restores the one that was active.
template <typename F> void on_every_isa(F&& body) {
  const Isa before = runtime::active_isa();
  for (Isa isa : runtime::supported_isas()) {
    runtime::set_isa(isa);
    INFO("instruction set ", runtime::isa_name(isa));
    body(isa);
  }
  runtime::set_isa(before);
}

// Test inputs: N(0, scale^2) values, then the edges.
template <typename T> std::vector<T> inputs(std::int64_t n, double scale, std::uint64_t seed) {
  Generator g(seed);
  std::vector<T> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = static_cast<T>(g.normal() * scale);
  return x;
}

// |got - want| in units of the float type's epsilon at want (at least the smallest normal).
template <typename T> double ulps(T got, long double want) {
  const long double unit =
      std::max<long double>(std::abs(want), std::numeric_limits<T>::min()) * std::numeric_limits<T>::epsilon();
  return static_cast<double>(std::abs(static_cast<long double>(got) - want) / unit);
}

long double gelu_erf_ref(long double u) { return 0.5L * u * (1.0L + std::erf(u / std::sqrt(2.0L))); }
long double gelu_erf_grad_ref(long double u) {
  const long double pi = 3.141592653589793238462643383279502884L;
  return 0.5L * (1.0L + std::erf(u / std::sqrt(2.0L))) + u * std::exp(-0.5L * u * u) / std::sqrt(2.0L * pi);
}
long double gelu_tanh_ref(long double u) {
  const long double c = std::sqrt(2.0L / 3.141592653589793238462643383279502884L);
  return 0.5L * u * (1.0L + std::tanh(c * (u + 0.044715L * u * u * u)));
}
long double gelu_tanh_grad_ref(long double u) {
  const long double c = std::sqrt(2.0L / 3.141592653589793238462643383279502884L);
  const long double t = std::tanh(c * (u + 0.044715L * u * u * u));
  return 0.5L * (1.0L + t) + 0.5L * u * (1.0L - t * t) * c * (1.0L + 3.0L * 0.044715L * u * u);
}

} // namespace

TEST_CASE("cpu_isa: names, what this CPU runs, and set_isa refusing more than that") {
  CHECK(runtime::parse_isa("avx2") == Isa::avx2);
  CHECK(runtime::parse_isa("avx512") == Isa::avx512);
  CHECK(runtime::parse_isa("baseline") == Isa::baseline);
  CHECK_THROWS_AS(runtime::parse_isa("sse4"), std::invalid_argument);
  const std::vector<Isa> all = runtime::supported_isas();
  REQUIRE(!all.empty());
  CHECK(all.front() == Isa::baseline);
  CHECK(all.back() == runtime::cpu_isa());
  if (runtime::cpu_isa() != Isa::avx512) CHECK_THROWS_AS(runtime::set_isa(Isa::avx512), std::invalid_argument);
  on_every_isa([](Isa isa) {
    CHECK(runtime::active_isa() == isa);
    CHECK(engine::active_isa_table().isa == isa); // the table of that instruction set, not another
  });
}

TEST_CASE("cpu_isa: HEADGRAD_ISA chooses the instruction set (ctest runs this with it set)") {
  // ctest runs this case a second time per instruction set with HEADGRAD_ISA set to it
  // (tests/CMakeLists.txt); without it the kernels use the widest the CPU runs.
  const char* env = std::getenv("HEADGRAD_ISA");
  if (!env) {
    CHECK(runtime::active_isa() == runtime::cpu_isa());
    CHECK(runtime::isa_notice().empty());
    return;
  }
  const Isa want = runtime::parse_isa(env);
  INFO("HEADGRAD_ISA=", env, ", the CPU runs up to ", runtime::isa_name(runtime::cpu_isa()));
  if (static_cast<int>(want) <= static_cast<int>(runtime::cpu_isa())) {
    CHECK(runtime::active_isa() == want);
    CHECK(runtime::isa_notice().empty());
  } else {
    CHECK(runtime::active_isa() == runtime::cpu_isa());
    CHECK(runtime::isa_notice().find("does not run") != std::string::npos);
  }
}

TEST_CASE_TEMPLATE("vector math: exp, log and tanh within 1 ulp of libm on every instruction set", T, float, double) {
  // n = 1000: whole vectors of every width and a partial last one
  const std::int64_t n = 1003;
  std::vector<T> x = inputs<T>(n, 10.0, 7), pos(x.size()), y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) pos[i] = std::abs(x[i]) * T(100) + T(1e-30);
  on_every_isa([&](Isa) {
    double worst_exp = 0, worst_log = 0, worst_tanh = 0;
    kernels::exp_n<T>(y.data(), x.data(), n);
    for (std::int64_t i = 0; i < n; ++i)
      worst_exp = std::max(worst_exp, ulps<T>(y[i], std::exp(static_cast<long double>(x[i]))));
    kernels::log_n<T>(y.data(), pos.data(), n);
    for (std::int64_t i = 0; i < n; ++i)
      worst_log = std::max(worst_log, ulps<T>(y[i], std::log(static_cast<long double>(pos[i]))));
    kernels::tanh_n<T>(y.data(), x.data(), n);
    for (std::int64_t i = 0; i < n; ++i)
      worst_tanh = std::max(worst_tanh, ulps<T>(y[i], std::tanh(static_cast<long double>(x[i]))));
    CHECK(worst_exp <= 1.0);
    CHECK(worst_log <= 1.0);
    CHECK(worst_tanh <= 1.0);
  });
}

TEST_CASE_TEMPLATE("vector math: the edges of exp, log and tanh as C's", T, float, double) {
  constexpr T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> x = {T(0), -T(0), inf, -inf, nan, T(1000), T(-1000)};
  std::vector<T> y(x.size());
  on_every_isa([&](Isa) {
    kernels::exp_n<T>(y.data(), x.data(), 7);
    CHECK(y[0] == T(1));
    CHECK(y[2] == inf);
    CHECK(y[3] == T(0));
    CHECK(std::isnan(y[4]));
    CHECK(y[5] == inf);
    CHECK(y[6] == T(0));
    kernels::log_n<T>(y.data(), x.data(), 7);
    CHECK(y[0] == -inf);
    CHECK(y[2] == inf);
    CHECK(std::isnan(y[3]));
    CHECK(std::isnan(y[4]));
    CHECK(std::isnan(y[6]));
    kernels::tanh_n<T>(y.data(), x.data(), 7);
    CHECK(y[0] == T(0));
    CHECK(y[2] == T(1));
    CHECK(y[3] == T(-1));
    CHECK(std::isnan(y[4]));
  });
}

TEST_CASE_TEMPLATE("gelu_rows: both forms and their derivatives against long double, bias, in place", T, float,
                   double) {
  // 7 rows of 37: partial vectors at every row's end, a bias per column
  const std::int64_t rows = 7, cols = 37, n = rows * cols;
  const std::vector<T> z = inputs<T>(n, 3.0, 11), bias = inputs<T>(cols, 1.0, 12);
  // float: PyTorch's erf (Abramowitz & Stegun 7.1.26, absolute error < 1e-6 in float arithmetic);
  // double: SLEEF's 1-ulp erf, exp and tanh, so a few ulp of the result
  const double tol = sizeof(T) == 4 ? 2e-6 : 1e-14;
  for (auto form : {kernels::GeluForm::erf, kernels::GeluForm::tanh}) {
    INFO((form == kernels::GeluForm::erf ? "erf form" : "tanh form"));
    on_every_isa([&](Isa) {
      std::vector<T> y(static_cast<std::size_t>(n)), d(static_cast<std::size_t>(n));
      kernels::gelu_rows<T>(y.data(), d.data(), z.data(), bias.data(), rows, cols, form);
      double worst_y = 0, worst_d = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
          const long double u = static_cast<long double>(z[r * cols + c] + bias[c]); // the kernel's rounded u
          const bool erf = form == kernels::GeluForm::erf;
          const long double wy = erf ? gelu_erf_ref(u) : gelu_tanh_ref(u);
          const long double wd = erf ? gelu_erf_grad_ref(u) : gelu_tanh_grad_ref(u);
          // relative to max(1, |u|): y's cancellation near u = 0 and its tail are absolute errors
          const long double scale = std::max(1.0L, std::abs(u));
          worst_y = std::max(worst_y, static_cast<double>(std::abs(y[r * cols + c] - wy) / scale));
          worst_d = std::max(worst_d, static_cast<double>(std::abs(d[r * cols + c] - wd) / scale));
        }
      CHECK(worst_y <= tol);
      CHECK(worst_d <= tol);
      // without the derivative, and in place over z: the same values
      std::vector<T> inplace = z;
      kernels::gelu_rows<T>(inplace.data(), nullptr, inplace.data(), bias.data(), rows, cols, form);
      CHECK(inplace == y);
    });
  }
}

TEST_CASE_TEMPLATE("gelu_rows: the edges PyTorch has (NaN, +-inf, large negative) on every instruction set", T, float,
                   double) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> z = {std::numeric_limits<T>::quiet_NaN(), inf, -inf, T(-10), T(-30), T(0), T(30)};
  std::vector<T> y(z.size()), d(z.size());
  for (auto form : {kernels::GeluForm::erf, kernels::GeluForm::tanh})
    on_every_isa([&](Isa) {
      kernels::gelu_rows<T>(y.data(), d.data(), z.data(), nullptr, 1, 7, form);
      CHECK(std::isnan(y[0]));
      CHECK(y[1] == inf);
      CHECK(std::isnan(y[2])); // -inf * 0, as PyTorch
      CHECK(std::abs(y[3]) < T(1e-20));
      CHECK(std::abs(y[4]) < T(1e-20));
      CHECK(y[5] == T(0));
      CHECK(y[6] == T(30));
      CHECK(std::isnan(d[0]));
      CHECK(std::abs(d[5] - T(0.5)) <= T(1e-7));
      CHECK(d[6] == T(1));
      CHECK(std::abs(d[4]) < T(1e-20));
    });
}

TEST_CASE("gelu_rows: every instruction set gives the same floats within 2e-6 (and doubles within 1e-14)") {
  const std::int64_t n = 4099;
  const std::vector<float> zf = inputs<float>(n, 4.0, 21);
  const std::vector<double> zd = inputs<double>(n, 4.0, 21);
  std::vector<float> base_f(static_cast<std::size_t>(n)), yf(base_f.size());
  std::vector<double> base_d(static_cast<std::size_t>(n)), yd(base_d.size());
  const Isa before = runtime::active_isa();
  runtime::set_isa(Isa::baseline);
  kernels::gelu_rows<float>(base_f.data(), nullptr, zf.data(), nullptr, 1, n, kernels::GeluForm::erf);
  kernels::gelu_rows<double>(base_d.data(), nullptr, zd.data(), nullptr, 1, n, kernels::GeluForm::erf);
  on_every_isa([&](Isa) {
    kernels::gelu_rows<float>(yf.data(), nullptr, zf.data(), nullptr, 1, n, kernels::GeluForm::erf);
    kernels::gelu_rows<double>(yd.data(), nullptr, zd.data(), nullptr, 1, n, kernels::GeluForm::erf);
    for (std::int64_t i = 0; i < n; ++i) {
      CHECK(std::abs(yf[i] - base_f[i]) <= 2e-6f * std::max(1.0f, std::abs(zf[i])));
      CHECK(std::abs(yd[i] - base_d[i]) <= 1e-14 * std::max(1.0, std::abs(zd[i])));
    }
  });
  runtime::set_isa(before);
}
