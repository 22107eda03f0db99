#include "bench/attention_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <vector>

#include "bench/timing.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/core/random.hpp"
#include "framework/engine/runtime/threads.hpp"

namespace headgrad::bench {
namespace {

struct Buffers {
  std::vector<float> q, k, v, o, dout, dq, dk, dv, p, lse;
};

// Seconds of one forward + backward by either algorithm (the median of `reps`), causal masking as
// a decoder uses it (kept-key lengths i + 1), the same inputs for both.
double seconds_of(bool flash, Buffers& b, const kernels::HeadsLayout& L, const std::vector<std::int64_t>& lens,
                  int reps) {
  const kernels::KeptKeys kept{lens.data(), nullptr};
  const float scale = 1.0f / std::sqrt(static_cast<float>(L.dh));
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    if (flash) {
      kernels::flash_attention_forward<float>(b.o.data(), b.lse.data(), b.q.data(), b.k.data(), b.v.data(), L, kept,
                                              scale);
      kernels::flash_attention_backward<float>(b.dq.data(), true, b.dk.data(), true, b.dv.data(), true,
                                               b.dout.data(), b.o.data(), b.lse.data(), b.q.data(), b.k.data(),
                                               b.v.data(), L, kept, scale);
    } else {
      kernels::attention_forward<float>(b.o.data(), b.p.data(), b.q.data(), b.k.data(), b.v.data(), L, kept, scale, {});
      kernels::attention_backward<float>(b.dq.data(), true, b.dk.data(), true, b.dv.data(), true, b.dout.data(),
                                         b.p.data(), b.q.data(), b.k.data(), b.v.data(), L, scale, kept, {});
    }
    times.push_back(now_seconds() - t0);
  }
  return median(times);
}

} // namespace

void run_attention_sweep(int threads) {
  runtime::set_threads(threads);
  fmt::print("fused attention, forward + backward, causal, float32, {} threads: keep-P vs flash (median ms)\n",
             threads);
  fmt::print("{:>4} {:>5} {:>4} {:>10} {:>10} {:>12} {:>8}\n", "dh", "T", "B*H", "keep-P", "flash", "flash/keep", "picks");
  Generator gen(0);
  for (const std::int64_t dh : {16, 64}) {
    for (const std::int64_t T : {64, 128, 192, 256, 384, 512, 1024, 2048}) {
      // about the same work per row: B*H heads of T x T scores, at least 2 per thread
      const std::int64_t BH = std::max<std::int64_t>(2 * threads, (1 << 21) / (T * T));
      kernels::HeadsLayout L;
      L.B = BH;
      L.H = 1;
      L.Tq = L.Tk = T;
      L.dh = dh;
      L.q_row = L.k_row = L.v_row = L.o_row = dh;
      L.q_batch = L.k_batch = L.v_batch = L.o_batch = T * dh;
      const auto n = static_cast<std::size_t>(BH * T * dh);
      Buffers b;
      for (auto* buf : {&b.q, &b.k, &b.v, &b.dout}) {
        buf->resize(n);
        for (float& x : *buf) x = static_cast<float>(gen.normal());
      }
      for (auto* buf : {&b.o, &b.dq, &b.dk, &b.dv}) buf->resize(n);
      b.p.resize(static_cast<std::size_t>(BH * T * T));
      b.lse.resize(static_cast<std::size_t>(BH * T));
      std::vector<std::int64_t> lens(static_cast<std::size_t>(BH * T));
      for (std::int64_t r = 0; r < BH * T; ++r) lens[static_cast<std::size_t>(r)] = r % T + 1;
      const int reps = T >= 1024 ? 5 : 11;
      seconds_of(false, b, L, lens, 1); // warm-up: first touch of P
      seconds_of(true, b, L, lens, 1);
      const double keep = seconds_of(false, b, L, lens, reps), flash = seconds_of(true, b, L, lens, reps);
      fmt::print("{:>4} {:>5} {:>4} {:>10.3f} {:>10.3f} {:>12.2f} {:>8}\n", dh, T, BH, keep * 1e3, flash * 1e3,
                 flash / keep, kernels::flash_attention_pays(T, T, dh) ? "flash" : "keep-P");
    }
  }
}

} // namespace headgrad::bench
