// test_bf16.cpp - float32 <-> bf16 conversion (framework/engine/blas/bf16.hpp): rounding to
// nearest even against an independent reference (the nearer of the two neighbouring bfloat16s,
// compared in double), NaN, infinities, overflow, subnormals, both instruction-set paths giving
// the same bits, and the CPU check of framework/engine/blas/bf16_cpu.hpp.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "framework/engine/blas/bf16.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using blas::bf16;
using test_support::ScopedEnv;

namespace {

std::uint16_t bits(bf16 x) { return static_cast<std::uint16_t>(x); }
std::uint16_t to_bits(float x) { return bits(blas::to_bf16(x)); }
float from_bits32(std::uint32_t u) { return std::bit_cast<float>(u); }

// A bf16's value as a double; the pattern just past the largest finite one (0x7f80, inf)
// counts as 2^128 here, which is where IEEE rounding puts the overflow threshold's other side.
double value_of(std::uint16_t b) {
  if ((b & 0x7fffu) == 0x7f80u) return (b & 0x8000u) ? -std::ldexp(1.0, 128) : std::ldexp(1.0, 128);
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
}

// Round to nearest, ties to even, written from the definition: of the two bfloat16s around x
// (x's upper half truncated, and the next one away from zero), the nearer; on a tie, the one
// with an even last bit. NaN: any NaN pattern.
std::uint16_t reference_round(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const auto lo = static_cast<std::uint16_t>(u >> 16);
  if ((u & 0xffffu) == 0 || std::isinf(x)) return lo; // exact
  const auto hi = static_cast<std::uint16_t>(lo + 1);  // the next magnitude, same sign
  const double dx = static_cast<double>(x), d_lo = std::abs(dx - value_of(lo)), d_hi = std::abs(value_of(hi) - dx);
  if (d_lo < d_hi) return lo;
  if (d_hi < d_lo) return hi;
  return (lo & 1u) ? hi : lo;
}

bool is_nan_bits(std::uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

// Each instruction set this CPU runs, made active in turn (the dispatching calls follow it).
template <typename F> void for_each_isa(F&& f) {
  const runtime::Isa before = runtime::active_isa();
  for (runtime::Isa isa : runtime::supported_isas()) {
    runtime::set_isa(isa);
    f(isa);
  }
  runtime::set_isa(before);
}

} // namespace

TEST_CASE("to_bf16: ties go to the even neighbour, anything past the half rounds away") {
  // around 1.0 the bf16 spacing is 2^-7, so 2^-8 is half of it
  CHECK(to_bits(1.0f) == 0x3f80);
  CHECK(to_bits(1.0f + 0x1p-8f) == 0x3f80);            // tie between 0x3f80 (even) and 0x3f81
  CHECK(to_bits(1.0f + 3 * 0x1p-8f) == 0x3f82);        // tie between 0x3f81 and 0x3f82 (even)
  CHECK(to_bits(1.0f + 0x1p-8f + 0x1p-23f) == 0x3f81); // just past the tie
  CHECK(to_bits(1.0f + 0x1p-8f - 0x1p-23f) == 0x3f80); // just short of it (1 + 2^-8 - 2^-23 is a float)
  CHECK(to_bits(-(1.0f + 0x1p-8f)) == 0xbf80);
  CHECK(to_bits(-(1.0f + 3 * 0x1p-8f)) == 0xbf82);
  CHECK(to_bits(0.0f) == 0x0000);
  CHECK(to_bits(-0.0f) == 0x8000);
  // a carry out of the fraction moves to the next binade: 2 - 2^-23 rounds to 2.0
  CHECK(to_bits(2.0f - 0x1p-23f) == 0x4000);
}

TEST_CASE("to_bf16: infinities, overflow to infinity and NaNs") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(to_bits(inf) == 0x7f80);
  CHECK(to_bits(-inf) == 0xff80);
  CHECK(to_bits(std::numeric_limits<float>::max()) == 0x7f80); // past the largest bf16's half ulp
  CHECK(to_bits(from_bits32(0x7f7f0000u)) == 0x7f7f);          // the largest finite bf16 stays
  CHECK(to_bits(from_bits32(0x7f7f7fffu)) == 0x7f7f);          // just short of the midpoint to 2^128
  CHECK(to_bits(from_bits32(0x7f7f8000u)) == 0x7f80);          // the midpoint: ties to even, which is inf
  // A NaN stays a NaN, quiet, with its sign and its upper payload bits. A signalling NaN whose
  // payload sits in the low half only (0x7f800001) is the trap: rounding its bits as a number
  // would make it infinity.
  CHECK(to_bits(from_bits32(0x7fc00000u)) == 0x7fc0);
  CHECK(to_bits(from_bits32(0xffc00000u)) == 0xffc0);
  CHECK(to_bits(from_bits32(0x7f800001u)) == 0x7fc0);
  CHECK(to_bits(from_bits32(0x7fa00000u)) == 0x7fe0);
  CHECK(to_bits(from_bits32(0x7fffffffu)) == 0x7fff); // no carry out of a NaN's payload
  CHECK(std::isnan(blas::to_float(blas::to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("to_bf16: subnormals round like any other number, never flushed to zero") {
  CHECK(to_bits(from_bits32(0x00010000u)) == 0x0001); // the smallest bf16 subnormal, exact
  CHECK(to_bits(from_bits32(0x00000001u)) == 0x0000); // the smallest float subnormal: far below half
  CHECK(to_bits(from_bits32(0x00008000u)) == 0x0000); // exactly half of 0x0001: tie, to even 0
  CHECK(to_bits(from_bits32(0x00008001u)) == 0x0001); // just past it
  CHECK(to_bits(from_bits32(0x00018000u)) == 0x0002); // tie between 0x0001 and 0x0002 (even)
  CHECK(to_bits(from_bits32(0x807f8000u)) == 0x8080); // the largest negative subnormals round up into the normals
  CHECK(to_bits(from_bits32(0x007fffffu)) == 0x0080);
  CHECK(blas::to_float(bf16(0x0001)) == std::ldexp(1.0f, -133));
}

TEST_CASE("to_float is exact, and every bf16 survives the round trip through float") {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto x = static_cast<std::uint16_t>(b);
    const float f = blas::to_float(bf16(x));
    CHECK_MESSAGE(std::bit_cast<std::uint32_t>(f) == (b << 16), "bf16 ", b);
    const std::uint16_t back = to_bits(f);
    if (is_nan_bits(x)) {
      CHECK(is_nan_bits(back));
      CHECK((back & 0x8000u) == (x & 0x8000u));
    } else if (back != x) {
      FAIL_CHECK("bf16 ", b, " came back as ", back);
    }
  }
  std::vector<bf16> in(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = bf16(static_cast<std::uint16_t>(i * 65 + 3));
  std::vector<float> out(in.size());
  blas::to_float(out.data(), in.data(), static_cast<std::int64_t>(in.size()));
  for (std::size_t i = 0; i < in.size(); ++i)
    CHECK(std::bit_cast<std::uint32_t>(out[i]) == static_cast<std::uint32_t>(static_cast<std::uint16_t>(in[i])) << 16);
}

TEST_CASE("to_bf16 agrees with rounding from the definition on every 97th float, on each instruction set") {
  // 2^32 / 97 = 44 million floats of every sign, exponent and fraction, NaNs and subnormals
  // included, in blocks through the dispatching array function.
  constexpr std::uint32_t kStride = 97;
  constexpr std::size_t kBlock = 1 << 16;
  for_each_isa([&](runtime::Isa isa) {
    const std::string isa_name = runtime::isa_name(isa);
    INFO("instruction set ", isa_name);
    std::vector<float> in(kBlock);
    std::vector<bf16> out(kBlock);
    std::int64_t checked = 0, wrong = 0;
    std::uint64_t u = 0;
    while (u <= 0xffffffffull) {
      std::size_t n = 0;
      for (; n < kBlock && u <= 0xffffffffull; ++n, u += kStride) in[n] = from_bits32(static_cast<std::uint32_t>(u));
      blas::to_bf16(out.data(), in.data(), static_cast<std::int64_t>(n));
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t got = bits(out[i]);
        const bool ok = std::isnan(in[i]) ? is_nan_bits(got) && got == to_bits(in[i]) : got == reference_round(in[i]);
        if (!ok && wrong++ < 5)
          FAIL_CHECK("float bits ", std::bit_cast<std::uint32_t>(in[i]), " -> ", got, ", expected ",
                     reference_round(in[i]));
      }
      checked += static_cast<std::int64_t>(n);
    }
    CHECK(wrong == 0);
    CHECK(checked > 44000000);
  });
}

TEST_CASE("to_bf16 of rows: ends shorter than a vector, and strides, leave everything else alone") {
  for_each_isa([&](runtime::Isa isa) {
    const std::string isa_name = runtime::isa_name(isa);
    INFO("instruction set ", isa_name);
    for (std::int64_t n : {0, 1, 15, 16, 17, 31, 33, 40}) {
      std::vector<float> in(static_cast<std::size_t>(n) + 8);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = 1.0f + static_cast<float>(i) * 0x1p-9f;
      std::vector<bf16> out(in.size(), bf16(0xabcd));
      blas::to_bf16(out.data(), in.data(), n);
      for (std::size_t i = 0; i < out.size(); ++i)
        CHECK(bits(out[i]) == (static_cast<std::int64_t>(i) < n ? to_bits(in[i]) : 0xabcd));
    }
    // 3 rows of 19, read with stride 23 and written with stride 21
    const std::int64_t rows = 3, cols = 19, ld_in = 23, ld_out = 21;
    std::vector<float> in(static_cast<std::size_t>(rows * ld_in));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = -3.0f + static_cast<float>(i) * 0.0371f;
    std::vector<bf16> out(static_cast<std::size_t>(rows * ld_out), bf16(0xabcd));
    blas::to_bf16(out.data(), ld_out, in.data(), ld_in, rows, cols);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < ld_out; ++c)
        CHECK(bits(out[static_cast<std::size_t>(r * ld_out + c)]) ==
              (c < cols ? to_bits(in[static_cast<std::size_t>(r * ld_in + c)]) : 0xabcd));
  });
}

namespace {
// The flags of the first processor in /proc/cpuinfo ("" where there is none).
std::string cpuinfo_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) return line.substr(line.find(':') + 1) + " ";
  return "";
}
bool has_flag(const std::string& flags, const std::string& name) { return flags.find(" " + name + " ") != std::string::npos; }

} // namespace

TEST_CASE("bf16_cpu reads the same avx512_bf16 and amx_bf16 as the kernel's /proc/cpuinfo") {
  const std::string flags = cpuinfo_flags();
  if (flags.empty()) return; // not Linux
  const blas::Bf16Cpu cpu = blas::bf16_cpu();
  CHECK(cpu.avx512_bf16 == has_flag(flags, "avx512_bf16"));
  CHECK(cpu.amx_bf16 == has_flag(flags, "amx_bf16"));
  CHECK(!cpu.onednn_isa.empty());
  // without the test hook, supported exactly when the CPU and oneDNN both have it
  CHECK(blas::bf16_supported() == ((cpu.avx512_bf16 || cpu.amx_bf16) && cpu.onednn_bf16));
}

TEST_CASE("bf16_missing names what a CPU without avx512_bf16 or amx_bf16 lacks (simulated by the test hook)") {
  {
    ScopedEnv hook("HEADGRAD_BF16_ASSUME_MISSING", "1");
    const blas::Bf16Cpu cpu = blas::bf16_cpu();
    CHECK_FALSE(cpu.avx512_bf16);
    CHECK_FALSE(cpu.amx_bf16);
    CHECK_FALSE(blas::bf16_supported());
    CHECK(blas::bf16_missing() == "this CPU has no avx512_bf16 or amx_bf16: bf16 training needs one of them");
  }
  // the hook holds only while set: after it, the CPU's own answer again
  const blas::Bf16Cpu cpu = blas::bf16_cpu();
  CHECK(blas::bf16_missing().empty() == ((cpu.avx512_bf16 || cpu.amx_bf16) && cpu.onednn_bf16));
}
