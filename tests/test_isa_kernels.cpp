// test_isa_kernels.cpp - the row, attention and Adam kernels built per instruction set
// (framework/engine/kernels/isa/row_kernels_isa.cpp, attention_heads.cpp): through the ops' calls
// (kernels/kernel_dispatch.cpp), every copy this CPU runs gives the baseline copy's results within
// the dtype's rounding (the AVX-512 copy sums 16 lanes where the others sum 8), and the copy that
// runs is the active instruction set's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "framework/engine/kernels/adam_update.hpp"
#include "framework/engine/kernels/attention_heads.hpp"
#include "framework/engine/kernels/cross_entropy_rows.hpp"
#include "framework/engine/kernels/kernel_table.hpp"
#include "framework/engine/kernels/layer_norm_rows.hpp"
#include "framework/engine/kernels/row_bias.hpp"
#include "framework/engine/kernels/row_softmax.hpp"
#include "framework/core/random.hpp"
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

// Runs `compute` (which fills its outputs) on the baseline copy, then on every other copy the CPU
// runs, and checks every output element against the baseline's: |a - b| <= tol (1 + |b|).
template <typename T> void same_on_every_isa(const std::function<std::vector<std::vector<T>>()>& compute) {
  const double tol = sizeof(T) == 4 ? 2e-5 : 1e-12;
  const Isa before = runtime::active_isa();
  runtime::set_isa(Isa::baseline);
  const std::vector<std::vector<T>> want = compute();
  for (Isa isa : runtime::supported_isas()) {
    runtime::set_isa(isa);
    REQUIRE(kernels::kernel_table().isa == isa);
    const std::vector<std::vector<T>> got = compute();
    REQUIRE(got.size() == want.size());
    for (std::size_t o = 0; o < got.size(); ++o) {
      REQUIRE(got[o].size() == want[o].size());
      double worst = 0;
      for (std::size_t i = 0; i < got[o].size(); ++i) {
        const double a = got[o][i], b = want[o][i];
        if (std::isnan(a) && std::isnan(b)) continue;
        worst = std::max(worst, std::abs(a - b) / (1 + std::abs(b)));
      }
      INFO(runtime::isa_name(isa), ": output ", o);
      CHECK(worst <= tol);
    }
  }
  runtime::set_isa(before);
}

} // namespace

TEST_CASE_TEMPLATE("isa kernels: softmax rows (plain, lengths, a keep mask) and log-softmax, both ways", T, float,
                   double) {
  const std::int64_t rows = 37, cols = 75; // partial vectors at the end of every row
  const std::vector<T> x = normal<T>(rows * cols, 1, 3.0), dy = normal<T>(rows * cols, 2);
  std::vector<std::int64_t> lens(rows);
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) lens[r] = r % 5 == 0 ? 0 : (r * 7) % cols + 1; // some rows keep nothing
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = static_cast<std::uint8_t>(i % 3 != 0);
  same_on_every_isa<T>([&] {
    std::vector<T> y(x.size()), ym(x.size()), dx(x.size()), dxm(x.size()), ly(x.size()), ldx(x.size());
    kernels::softmax_forward<T>(y.data(), x.data(), nullptr, nullptr, rows, cols);
    kernels::softmax_forward<T>(ym.data(), x.data(), lens.data(), keep.data(), rows, cols);
    kernels::softmax_backward<T>(dx.data(), true, dy.data(), y.data(), nullptr, nullptr, rows, cols);
    kernels::softmax_backward<T>(dxm.data(), true, dy.data(), ym.data(), lens.data(), keep.data(), rows, cols);
    kernels::log_softmax_forward<T>(ly.data(), x.data(), rows, cols);
    kernels::log_softmax_backward<T>(ldx.data(), true, dy.data(), ly.data(), rows, cols);
    return std::vector<std::vector<T>>{y, ym, dx, dxm, ly, ldx};
  });
}

TEST_CASE_TEMPLATE("isa kernels: layer norm and add + layer norm, forward and backward", T, float, double) {
  const std::int64_t rows = 29, D = 133;
  const std::vector<T> x = normal<T>(rows * D, 3, 2.0), r = normal<T>(rows * D, 4), w = normal<T>(D, 5),
                       b = normal<T>(D, 6), dy = normal<T>(rows * D, 7);
  same_on_every_isa<T>([&] {
    std::vector<T> y(x.size()), st(2 * rows), dx(x.size()), dw(D), db(D), ya(x.size()), s(x.size()), sta(2 * rows);
    kernels::layer_norm_forward<T>(y.data(), st.data(), x.data(), w.data(), b.data(), rows, D, T(1e-5));
    kernels::layer_norm_backward<T>(dx.data(), true, dw.data(), true, db.data(), true, dy.data(), x.data(), w.data(),
                                    st.data(), rows, D);
    kernels::add_layer_norm_forward<T>(ya.data(), s.data(), sta.data(), x.data(), r.data(), w.data(), b.data(), rows, D,
                                       T(1e-5));
    return std::vector<std::vector<T>>{y, st, dx, dw, db, ya, s, sta};
  });
}

TEST_CASE_TEMPLATE("isa kernels: cross-entropy rows, bias rows, residual rows and column sums", T, float, double) {
  const std::int64_t rows = 23, V = 67;
  const std::vector<T> x = normal<T>(rows * V, 8, 4.0), bias = normal<T>(V, 9);
  std::vector<std::int64_t> target(rows);
  std::vector<double> weight(rows);
  std::vector<T> scale(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    target[r] = (r * 11) % V;
    weight[r] = r % 4 == 0 ? 0.0 : 1.0;
    scale[r] = static_cast<T>(weight[r] / rows);
  }
  same_on_every_isa<T>([&] {
    std::vector<T> probs(x.size()), loss(rows), dx(x.size()), filled(x.size()), sums(V);
    const double total =
        kernels::cross_entropy_forward<T>(probs.data(), loss.data(), x.data(), target.data(), weight.data(), rows, V);
    kernels::cross_entropy_backward<T>(dx.data(), true, probs.data(), target.data(), scale.data(), rows, V);
    kernels::fill_rows<T>(filled.data(), bias.data(), rows, V);
    kernels::column_sums<T>(sums.data(), true, x.data(), rows, V);
    std::vector<T> added(x.size()), copied(x.size());
    kernels::add_rows<T>(added.data(), x.data(), bias.data(), rows, V); // x + bias in every row
    kernels::add_rows<T>(copied.data(), x.data(), nullptr, rows, V);     // no bias: x itself
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < V; ++c) {
        const std::size_t i = static_cast<std::size_t>(r * V + c);
        REQUIRE(added[i] == x[i] + bias[static_cast<std::size_t>(c)]);
        REQUIRE(copied[i] == x[i]);
      }
    return std::vector<std::vector<T>>{probs, loss, dx, filled, sums, {static_cast<T>(total)}, added, copied};
  });
}

TEST_CASE_TEMPLATE("isa kernels: attention per head, keeping the weights and FlashAttention-2 tiles", T, float,
                   double) {
  // B 2, H 3, T 70 (a partial key tile), dh 8, causal through per-query lengths
  kernels::HeadsLayout L;
  L.B = 2, L.H = 3, L.Tq = 70, L.Tk = 70, L.dh = 8;
  const std::int64_t C = L.H * L.dh;
  L.q_row = L.k_row = L.v_row = L.o_row = C;
  L.q_batch = L.k_batch = L.v_batch = L.o_batch = L.Tq * C;
  const std::int64_t n = L.B * L.Tq * C;
  const std::vector<T> q = normal<T>(n, 10), k = normal<T>(n, 11), v = normal<T>(n, 12), dout = normal<T>(n, 13);
  std::vector<std::int64_t> lens(static_cast<std::size_t>(L.B * L.Tq));
  for (std::int64_t b = 0; b < L.B; ++b)
    for (std::int64_t i = 0; i < L.Tq; ++i) lens[static_cast<std::size_t>(b * L.Tq + i)] = i + 1;
  const kernels::KeptKeys kept{lens.data(), nullptr};
  const T scale = T(1) / std::sqrt(T(L.dh));
  same_on_every_isa<T>([&] {
    std::vector<T> o(n), p(static_cast<std::size_t>(L.B * L.H * L.Tq * L.Tk)), dq(n), dk(n), dv(n);
    std::vector<T> fo(n), lse(static_cast<std::size_t>(L.B * L.H * L.Tq)), fdq(n), fdk(n), fdv(n);
    kernels::attention_forward<T>(o.data(), p.data(), q.data(), k.data(), v.data(), L, kept, scale);
    kernels::attention_backward<T>(dq.data(), true, dk.data(), true, dv.data(), true, dout.data(), p.data(), q.data(),
                                   k.data(), v.data(), L, scale);
    kernels::flash_attention_forward<T>(fo.data(), lse.data(), q.data(), k.data(), v.data(), L, kept, scale);
    kernels::flash_attention_backward<T>(fdq.data(), true, fdk.data(), true, fdv.data(), true, dout.data(), fo.data(),
                                         lse.data(), q.data(), k.data(), v.data(), L, kept, scale);
    return std::vector<std::vector<T>>{o, p, dq, dk, dv, fo, lse, fdq, fdk, fdv};
  });
}

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
  CHECK(kernels::isa_baseline::kernel_table().isa == Isa::baseline);
  CHECK(bool(kernels::isa_baseline::kernel_table().rows_f32.layer_norm_forward));
#if HEADGRAD_TEST_MULTI_ISA
  CHECK(kernels::isa_avx2::kernel_table().isa == Isa::avx2);
  CHECK(kernels::isa_avx512::kernel_table().isa == Isa::avx512);
  // distinct code, not one instance shared by all three (isa_namespace.hpp)
  const bool distinct_ln = kernels::isa_avx2::kernel_table().rows_f32.layer_norm_forward !=
                           kernels::isa_baseline::kernel_table().rows_f32.layer_norm_forward;
  const bool distinct_softmax = kernels::isa_avx512::kernel_table().rows_f32.softmax_forward !=
                                kernels::isa_avx2::kernel_table().rows_f32.softmax_forward;
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
        kernels::attention_forward<float>(o.data(), p.data(), q.data(), k.data(), v.data(), L, {}, 1.0f);
        CHECK(p[1] > 0.0f); // the weight itself is a (tiny) normal number
        kernels::attention_backward<float>(dq.data(), true, dk.data(), true, dv.data(), true, dout.data(), p.data(),
                                           q.data(), k.data(), v.data(), L, 1.0f);
      }
      CHECK(dv[0] == doctest::Approx(2e-5f));
      for (float g : {dq[0], dq[1], dk[0], dk[1], dv[0], dv[1]}) CHECK_FALSE(subnormal(g));
      CHECK(dv[1] == 0.0f);
      CHECK(dk[1] == 0.0f);
    }
  }
  runtime::set_isa(before);
}
