// test_isa_kernels.cpp - what holds across the copies of the kernels built per instruction set
// (framework/engine/kernels/isa/) beyond agreeing with the book's loops (test_kernel_table.cpp):
// the Adam update gives the same bits on every copy, each copy's table holds its own code, and
// attention's gradients have no subnormal numbers on any copy.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "framework/core/random.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/kernel_table.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"

using namespace headgrad;
using runtime::Isa;

namespace {

template <typename T> std::vector<T> normal(std::int64_t n, std::uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<T>(g.normal() * scale);
  return v;
}

} // namespace

// The optimizer is bit-exact against PyTorch (test_optimizer_golden), so its copies must agree to
// the bit, not within rounding: every operation is IEEE (sqrt and division included), no copy
// fuses a multiply-add the baseline does not (-ffp-contract=off), and the float32 fused product is
// formed in double.
TEST_CASE_TEMPLATE("isa kernels: the Adam update gives the same bits on every copy (Adam, AdamW, AMSGrad, maximize)",
                   T, float, double) {
  const std::int64_t n = 1037; // not a multiple of any vector width: the tails run too
  const std::vector<T> w0 = normal<T>(n, 21), g = normal<T>(n, 22, 3.0), m0 = normal<T>(n, 23, 0.1);
  std::vector<T> v0 = normal<T>(n, 24, 0.01);
  for (auto& x : v0) x = x * x;
  for (const bool decoupled : {false, true})
    for (const bool amsgrad : {false, true})
      for (const bool maximize : {false, true}) {
        const kernels::AdamScalars<T> c{T(0.9), T(0.999), T(0.1), T(0.001), T(1e-8), T(0.01), T(0.003), T(0.3),
                                        T(0.99999), maximize ? T(-1) : T(1), decoupled};
        auto run = [&] {
          std::vector<T> w = w0, m = m0, v = v0, vmax = v0;
          for (int step = 0; step < 3; ++step)
            kernels::adam_update<T>(w.data(), g.data(), m.data(), v.data(), amsgrad ? vmax.data() : nullptr, n, c);
          return std::vector<std::vector<T>>{w, m, v, vmax};
        };
        const Isa before = runtime::active_isa();
        runtime::set_isa(Isa::baseline);
        const auto want = run();
        for (Isa isa : runtime::supported_isas()) {
          runtime::set_isa(isa);
          const auto got = run();
          INFO(runtime::isa_name(isa), " decoupled ", decoupled, " amsgrad ", amsgrad, " maximize ", maximize);
          for (std::size_t o = 0; o < got.size(); ++o)
            CHECK(std::memcmp(got[o].data(), want[o].data(), got[o].size() * sizeof(T)) == 0);
        }
        runtime::set_isa(before);
      }
}

TEST_CASE("isa kernels: each copy's table holds its own instruction set's kernels") {
  CHECK(engine::isa_baseline::isa_table().isa == Isa::baseline);
  CHECK(bool(engine::isa_baseline::isa_table().kernels.f32.layer_norm_forward));
#if HEADGRAD_TEST_MULTI_ISA
  CHECK(engine::isa_avx2::isa_table().isa == Isa::avx2);
  CHECK(engine::isa_avx512::isa_table().isa == Isa::avx512);
  // distinct code, not one instance shared by all three (isa_namespace.hpp)
  const bool distinct_ln = engine::isa_avx2::isa_table().kernels.f32.layer_norm_forward !=
                           engine::isa_baseline::isa_table().kernels.f32.layer_norm_forward;
  const bool distinct_softmax = engine::isa_avx512::isa_table().kernels.f32.softmax_forward !=
                                engine::isa_avx2::isa_table().kernels.f32.softmax_forward;
  CHECK(distinct_ln);
  CHECK(distinct_softmax);
#endif
}

TEST_CASE("isa kernels: attention's gradients have no subnormal numbers (flushed to zero)") {
  // Two queries that both look at key 0 and almost not at key 1 (score gap 80: P = 1.8e-35, a
  // normal float), with dO = 1e-5: key 1's dV and dK are ~1e-40, subnormal, unless flushed. Every
  // gemm that reads a subnormal runs on the CPU's slow path (3x on the default model's next gemm).
  kernels::HeadsLayout L;
  L.B = 1, L.H = 1, L.Tq = 2, L.Tk = 2, L.dh = 1;
  L.q_row = L.k_row = L.v_row = L.o_row = 1;
  L.q_batch = L.k_batch = L.v_batch = L.o_batch = 2;
  const std::vector<float> q = {1, 1}, k = {0, -80}, v = {1, 2}, dout = {1e-5f, 1e-5f};
  auto subnormal = [](float x) { return x != 0 && std::abs(x) < std::numeric_limits<float>::min(); };
  const Isa before = runtime::active_isa();
  for (Isa isa : runtime::supported_isas()) {
    runtime::set_isa(isa);
    INFO(runtime::isa_name(isa));
    for (bool flash : {false, true}) {
      INFO((flash ? "flash" : "keeping P"));
      std::vector<float> o(2), p(4), lse(2), dq(2), dk(2), dv(2);
      if (flash) {
        kernels::flash_attention_forward<float>(o.data(), lse.data(), q.data(), k.data(), v.data(), L, {}, 1.0f);
        kernels::flash_attention_backward<float>(dq.data(), true, dk.data(), true, dv.data(), true, dout.data(),
                                                 o.data(), lse.data(), q.data(), k.data(), v.data(), L, {}, 1.0f);
      } else {
        kernels::attention_forward<float>(o.data(), p.data(), q.data(), k.data(), v.data(), L, {}, 1.0f, {});
        CHECK(p[1] > 0.0f); // the weight itself is a (tiny) normal number
        kernels::attention_backward<float>(dq.data(), true, dk.data(), true, dv.data(), true, dout.data(), p.data(),
                                           q.data(), k.data(), v.data(), L, 1.0f, {}, {});
      }
      CHECK(dv[0] == doctest::Approx(2e-5f));
      for (float g : {dq[0], dq[1], dk[0], dk[1], dv[0], dv[1]}) CHECK_FALSE(subnormal(g));
      CHECK(dv[1] == 0.0f);
      CHECK(dk[1] == 0.0f);
    }
  }
  runtime::set_isa(before);
}
