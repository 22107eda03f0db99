// test_kernels.cpp - the hand-vectorisable kernels in framework/engine/kernels/vec_math.hpp against
// their plain definitions: exp_f32 against std::exp over the whole float range, and the lane
// reductions against a long-double reference; and the book's map_backward (framework/ops/map.hpp)
// with dx a buffer of its own and dy's own buffer, as a fused activation's backward runs it.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "framework/core/random.hpp"
#include "framework/engine/kernels/vec_math.hpp"
#include "framework/ops/map.hpp"

using namespace headgrad;

namespace {
// Distance in units in the last place between two finite floats of the same sign.
std::int64_t ulp_distance(float a, float b) {
  const auto ia = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a));
  const auto ib = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b));
  return ia > ib ? ia - ib : ib - ia;
}
} // namespace

TEST_CASE("exp_f32 is within 2 ulp of std::exp on every 97th float of its normal range") {
  // Every float from -87.33 to 88.72 would be ~2.1e9 values; a stride of 97 bit patterns still
  // visits ~2.2e7 of them, spread evenly over both signs and every exponent.
  std::int64_t worst = 0;
  float worst_x = 0;
  std::int64_t checked = 0;
  auto check_range = [&](float lo, float hi) {
    for (std::uint32_t bits = std::bit_cast<std::uint32_t>(lo);; bits += 97) {
      const float x = std::bit_cast<float>(bits);
      if (!(x <= hi)) break;
      const float ref = static_cast<float>(std::exp(static_cast<double>(x)));
      if (ref < std::numeric_limits<float>::min()) continue; // subnormal results: see the next case
      const std::int64_t d = ulp_distance(engine::exp_f32(x), ref);
      if (d > worst) { worst = d; worst_x = x; }
      ++checked;
    }
  };
  check_range(0.0f, 88.72f); // positive floats increase with their bits
  // the bits of -0.0 upwards walk the negative floats away from zero
  for (std::uint32_t bits = std::bit_cast<std::uint32_t>(-0.0f); ; bits += 97) {
    const float x = std::bit_cast<float>(bits);
    if (x < -87.33f) break;
    const float ref = static_cast<float>(std::exp(static_cast<double>(x)));
    if (ref < std::numeric_limits<float>::min()) continue;
    const std::int64_t d = ulp_distance(engine::exp_f32(x), ref);
    if (d > worst) { worst = d; worst_x = x; }
    ++checked;
  }
  INFO("worst x = ", worst_x, ", checked ", checked);
  CHECK(checked > 20000000);
  CHECK(worst <= 2);
}

TEST_CASE("exp_f32 edge cases: 0, overflow, underflow, infinities, NaN") {
  CHECK(engine::exp_f32(0.0f) == 1.0f);
  CHECK(engine::exp_f32(-0.0f) == 1.0f);
  CHECK(engine::exp_f32(88.8f) == std::numeric_limits<float>::infinity());
  CHECK(engine::exp_f32(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(engine::exp_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(engine::exp_f32(-100.0f) == 0.0f);
  CHECK(std::isnan(engine::exp_f32(std::numeric_limits<float>::quiet_NaN())));
  // the top of the range stays finite and correct (2^128 is assembled as 2^64 * 2^64)
  const float top = 88.7228f;
  CHECK(std::isfinite(engine::exp_f32(top)));
  CHECK(ulp_distance(engine::exp_f32(top), std::exp(top)) <= 2);
  // between the smallest normal's log and the clamp, results are tiny but not garbage
  CHECK(engine::exp_f32(-87.0f) == doctest::Approx(std::exp(-87.0f)).epsilon(1e-6));
}

TEST_CASE("lane reductions equal the long-double sums for every length 0..70") {
  Generator gen(3);
  for (std::int64_t n = 0; n <= 70; ++n) {
    std::vector<float> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
    long double s = 0, d = 0, abs_s = 0, abs_d = 0;
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j) {
      x[static_cast<std::size_t>(j)] = static_cast<float>(gen.normal());
      y[static_cast<std::size_t>(j)] = static_cast<float>(gen.normal());
      s += x[static_cast<std::size_t>(j)];
      d += static_cast<long double>(x[static_cast<std::size_t>(j)]) * y[static_cast<std::size_t>(j)];
      abs_s += std::fabs(x[static_cast<std::size_t>(j)]);
      abs_d += std::fabs(static_cast<long double>(x[static_cast<std::size_t>(j)]) * y[static_cast<std::size_t>(j)]);
      m = std::max(m, x[static_cast<std::size_t>(j)]);
    }
    CAPTURE(n);
    // float summation error bound: n * eps * sum |terms|
    CHECK(std::fabs(static_cast<long double>(engine::sum_lanes(x.data(), n)) - s) <= 1e-6L * (n + 1) * abs_s);
    CHECK(std::fabs(static_cast<long double>(engine::dot_lanes(x.data(), y.data(), n)) - d) <=
          1e-6L * (n + 1) * abs_d);
    CHECK(engine::max_lanes(x.data(), n) == m);
  }
}

TEST_CASE("max_lanes is -inf only when no element is NaN, for a NaN at every place of every length") {
  // The softmax kernels take a -inf max as "nothing kept": a NaN among -inf values must not read as
  // that, wherever the NaN sits among the lanes (a plain running max dropped it when a -inf came
  // after it in its lane, or in the pairwise combine).
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (std::int64_t n = 1; n <= 40; ++n)
    for (std::int64_t at = 0; at < n; ++at) {
      CAPTURE(n);
      CAPTURE(at);
      std::vector<float> x(static_cast<std::size_t>(n), kNegInf);
      x[static_cast<std::size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
      CHECK(std::isnan(engine::max_lanes(x.data(), n)));
    }
  CHECK(engine::max_lanes<float>(nullptr, 0) == kNegInf);
  const float all[3] = {kNegInf, kNegInf, kNegInf};
  CHECK(engine::max_lanes(all, 3) == kNegInf);
  // max_nan keeps a NaN from either side
  CHECK(std::isnan(engine::max_nan(std::nanf(""), 1.0f)));
  CHECK(std::isnan(engine::max_nan(1.0f, std::nanf(""))));
  CHECK(engine::max_nan(1.0f, 2.0f) == 2.0f);
}

TEST_CASE("map_backward: dz = dy * g into a buffer of its own and in place over dy, the same floats") {
  // 1003: whole vectors and a partial one; 300,000: enough to go over the threads
  for (const std::int64_t n : {std::int64_t{1003}, std::int64_t{300000}}) {
    Generator gen(5);
    std::vector<float> dy(static_cast<std::size_t>(n)), g(dy.size()), dz(dy.size());
    for (auto& v : dy) v = static_cast<float>(gen.normal());
    for (auto& v : g) v = static_cast<float>(gen.uniform());
    const auto times_g = [](float gi, float) { return gi; };
    book::map_backward<float>(dz.data(), true, dy.data(), g.data(), g.data(), n, times_g);
    bool exact = true;
    for (std::size_t i = 0; i < dy.size(); ++i) exact = exact && dz[i] == dy[i] * g[i];
    CHECK(exact);
    std::vector<float> in_place = dy;
    book::map_backward<float>(in_place.data(), true, in_place.data(), g.data(), g.data(), n, times_g);
    CHECK(in_place == dz);
  }
}
