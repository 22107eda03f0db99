// test_kernel_table.cpp - every kernel of the seam's list (framework/engine/kernels.hpp) against its
// book loop (book::NAME, beside its op), in float and double, on every instruction-set copy this
// CPU runs. One case per kernel, named as in the list: a case runs its kernel from a table on fixed
// inputs (masked rows, rows that keep nothing, NaN and infinity where the kernel's comment says what
// they give, first writes and accumulation) and returns what it wrote. The engine's table and the
// book's must give the same values within the dtype's rounding - NaN where the other has NaN. A
// kernel added to the list without a case fails here, and a deliberately wrong loop must fail too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "framework/core/random.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/kernel_table.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"

using namespace headgrad;

namespace {

template <typename T> using Set = kernels::KernelSet<T>;
using Outputs = std::vector<std::vector<double>>;
// A case: kernel NAME of the given table, run on the case's inputs; what it wrote.
template <typename T> using Case = std::function<Outputs(const Set<T>&)>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T> std::vector<T> normal(std::int64_t n, std::uint64_t seed, double scale = 1.0, double shift = 0) {
  Generator g(seed);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<T>(g.normal() * scale + shift);
  return v;
}
template <typename T> std::vector<double> out(const std::vector<T>& v) { return {v.begin(), v.end()}; }
// A destination as a kernel finds it: NaN on a first write (never to be read), 1 when adding.
template <typename T> std::vector<T> start(std::int64_t n, bool first) {
  return std::vector<T>(static_cast<std::size_t>(n), first ? T(kNaN) : T(1));
}
template <typename T> std::size_t at(T i) { return static_cast<std::size_t>(i); }

// The largest |a - b| / (1 + |b|) over every output, infinity where one is NaN and the other not.
double difference(const Outputs& a, const Outputs& b) {
  if (a.size() != b.size()) return kInf;
  double worst = 0;
  for (std::size_t o = 0; o < a.size(); ++o) {
    if (a[o].size() != b[o].size()) return kInf;
    for (std::size_t i = 0; i < a[o].size(); ++i) {
      const double x = a[o][i], y = b[o][i];
      if (std::isnan(x) || std::isnan(y)) {
        if (std::isnan(x) != std::isnan(y)) return kInf;
      } else if (std::isinf(x) || std::isinf(y)) {
        if (x != y) return kInf;
      } else {
        worst = std::max(worst, std::abs(x - y) / (1 + std::abs(y)));
      }
    }
  }
  return worst;
}
template <typename T> double tolerance() { return sizeof(T) == 4 ? 1e-4 : 1e-10; }

// ---- the inputs the cases share -------------------------------------------------------------
// Rows of 13 with kept lengths (one row keeps nothing, one only its first key, one more than its
// keys), keep flags, a NaN in a kept logit of row 3 and +inf in one of row 6.
constexpr std::int64_t kRows = 7, kCols = 13;
const std::vector<std::int64_t> kLens = {13, 5, 0, 13, 1, 9, 40};
std::vector<std::uint8_t> keep_flags(std::int64_t rows, std::int64_t cols) {
  std::vector<std::uint8_t> k(at(rows * cols));
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = i % 4 != 1;
  return k;
}
template <typename T> std::vector<T> logits() {
  std::vector<T> x = normal<T>(kRows * kCols, 1, 3.0);
  x[at(3 * kCols + 2)] = T(kNaN);
  x[at(6 * kCols)] = T(kInf);
  return x;
}

// Attention: Q (B, Tq, H dh), K and V (B, Tk, H dh), per-query lengths, optional keep flags (per
// head) and dropout flags.
struct Heads {
  kernels::HeadsLayout L;
  std::vector<std::int64_t> lens;
  std::vector<std::uint8_t> keep, drop;
  double drop_scale = 1;
  kernels::KeptKeys kept() const {
    return {lens.empty() ? nullptr : lens.data(), keep.empty() ? nullptr : keep.data(), !keep.empty()};
  }
  kernels::WeightsDropout dropout() const { return {drop.empty() ? nullptr : drop.data(), drop_scale}; }
  std::int64_t nq() const { return L.B * L.Tq * L.H * L.dh; }
  std::int64_t nk() const { return L.B * L.Tk * L.H * L.dh; }
  std::int64_t np() const { return L.B * L.H * L.Tq * L.Tk; }
};
Heads heads(std::int64_t B, std::int64_t H, std::int64_t Tq, std::int64_t Tk, std::int64_t dh) {
  Heads h;
  const std::int64_t C = H * dh;
  h.L = {B, H, Tq, Tk, dh, C, C, C, C, Tq * C, Tk * C, Tk * C, Tq * C};
  return h;
}
// Three shapes: keep flags and dropout (the gemm path); causal lengths at a head size the row
// kernels take; long causal rows for the flash tiles (70 keys: a partial tile), one row keeping
// nothing.
std::vector<Heads> attention_problems() {
  Heads a = heads(2, 2, 9, 11, 4);
  a.lens = {11, 3, 0, 7, 11, 11, 1, 5, 9, 2, 11, 11, 11, 6, 8, 4, 11, 10};
  a.keep = keep_flags(a.L.B * a.L.H * a.L.Tq, a.L.Tk);
  a.drop.resize(at(a.np()));
  for (std::size_t i = 0; i < a.drop.size(); ++i) a.drop[i] = i % 5 != 2;
  a.drop_scale = 1.0 / (1.0 - 0.2);
  Heads b = heads(1, 2, 20, 20, 16);
  Heads c = heads(1, 2, 70, 70, 8);
  for (Heads* h : {&b, &c})
    for (std::int64_t i = 0; i < h->L.Tq; ++i) h->lens.push_back(i + 1);
  c.lens[5] = 0;
  return {a, b, c};
}

template <typename T> std::map<std::string, Case<T>> cases() {
  std::map<std::string, Case<T>> c;
  const std::vector<std::uint8_t> keep = keep_flags(kRows, kCols);

  c["softmax_forward"] = [=](const Set<T>& s) {
    const std::vector<T> x = logits<T>();
    std::vector<T> y(x.size()), ym(x.size());
    s.softmax_forward(y.data(), x.data(), nullptr, nullptr, kRows, kCols);
    s.softmax_forward(ym.data(), x.data(), kLens.data(), keep.data(), kRows, kCols);
    return Outputs{out(y), out(ym)};
  };
  c["softmax_backward"] = [=](const Set<T>& s) {
    const std::vector<T> x = normal<T>(kRows * kCols, 2, 2.0);
    std::vector<T> y(x.size()), ym(x.size()), dy = normal<T>(kRows * kCols, 3);
    dy[at(1 * kCols + 7)] = T(kNaN); // a masked key (row 1 keeps 5)
    dy[at(4 * kCols)] = T(kInf);     // the one kept key of row 4
    book::softmax_forward<T>(y.data(), x.data(), nullptr, nullptr, kRows, kCols);
    book::softmax_forward<T>(ym.data(), x.data(), kLens.data(), keep.data(), kRows, kCols);
    Outputs o;
    for (bool first : {true, false}) {
      std::vector<T> dx = start<T>(kRows * kCols, first), dxm = start<T>(kRows * kCols, first);
      s.softmax_backward(dx.data(), first, dy.data(), y.data(), nullptr, nullptr, kRows, kCols);
      s.softmax_backward(dxm.data(), first, dy.data(), ym.data(), kLens.data(), keep.data(), kRows, kCols);
      o.push_back(out(dx));
      o.push_back(out(dxm));
    }
    return o;
  };

  constexpr std::int64_t R = 6, D = 37;
  c["layer_norm_forward"] = [](const Set<T>& s) {
    const std::vector<T> x = normal<T>(R * D, 7, 2.0, 0.5), w = normal<T>(D, 8), b = normal<T>(D, 9);
    std::vector<T> y(x.size()), st(2 * R);
    s.layer_norm_forward(y.data(), st.data(), x.data(), w.data(), b.data(), R, D, T(1e-5));
    return Outputs{out(y), out(st)};
  };
  c["add_layer_norm_forward"] = [](const Set<T>& s) {
    const std::vector<T> a = normal<T>(R * D, 10), r = normal<T>(R * D, 11), w = normal<T>(D, 12), b = normal<T>(D, 13);
    std::vector<T> y(a.size()), sum(a.size()), st(2 * R);
    s.add_layer_norm_forward(y.data(), sum.data(), st.data(), a.data(), r.data(), w.data(), b.data(), R, D, T(1e-5));
    return Outputs{out(y), out(sum), out(st)};
  };
  c["layer_norm_backward"] = [](const Set<T>& s) {
    const std::vector<T> x = normal<T>(R * D, 14, 2.0), w = normal<T>(D, 15), b = normal<T>(D, 16),
                         dy = normal<T>(R * D, 17);
    std::vector<T> y(x.size()), st(2 * R);
    book::layer_norm_forward<T>(y.data(), st.data(), x.data(), w.data(), b.data(), R, D, T(1e-5));
    Outputs o;
    for (bool first : {true, false}) {
      std::vector<T> dx = start<T>(R * D, first), dw = start<T>(D, first), db = start<T>(D, first);
      s.layer_norm_backward(dx.data(), first, dw.data(), first, db.data(), first, dy.data(), x.data(), w.data(),
                            st.data(), R, D);
      std::vector<T> dx_only = start<T>(R * D, first); // a frozen affine: no dw, no db
      s.layer_norm_backward(dx_only.data(), first, nullptr, false, nullptr, false, dy.data(), x.data(), w.data(),
                            st.data(), R, D);
      o.insert(o.end(), {out(dx), out(dw), out(db), out(dx_only)});
    }
    return o;
  };

  constexpr std::int64_t V = 19;
  const std::vector<std::int64_t> target = {0, 18, 3, 7, 7, 11};
  const std::vector<double> weight = {1, 0, 0.5, 2, 1, 1};
  c["cross_entropy_forward"] = [=](const Set<T>& s) {
    std::vector<T> x = normal<T>(R * V, 18, 4.0), probs(x.size()), loss(R);
    x[at(4 * V + 2)] = T(kNaN); // a counted row holding a NaN
    const double total = s.cross_entropy_forward(probs.data(), loss.data(), x.data(), target.data(), weight.data(), R, V);
    return Outputs{out(probs), out(loss), {total}};
  };
  c["cross_entropy_backward"] = [=](const Set<T>& s) {
    const std::vector<T> x = normal<T>(R * V, 19, 4.0);
    std::vector<T> probs(x.size());
    book::cross_entropy_forward<T>(probs.data(), nullptr, x.data(), target.data(), weight.data(), R, V);
    const std::vector<T> scale = {T(0.5), T(0), T(0.25), T(1), T(-0.5), T(0.5)};
    Outputs o;
    for (bool first : {true, false}) {
      std::vector<T> dx = start<T>(R * V, first);
      s.cross_entropy_backward(dx.data(), first, probs.data(), target.data(), scale.data(), R, V);
      o.push_back(out(dx));
    }
    return o;
  };

  c["fill_rows"] = [](const Set<T>& s) {
    const std::vector<T> b = normal<T>(V, 20);
    std::vector<T> y(R * V);
    s.fill_rows(y.data(), b.data(), R, V);
    return Outputs{out(y)};
  };
  c["add_rows"] = [](const Set<T>& s) {
    const std::vector<T> res = normal<T>(R * V, 21), b = normal<T>(V, 22);
    std::vector<T> y(res.size()), copy(res.size());
    s.add_rows(y.data(), res.data(), b.data(), R, V);
    s.add_rows(copy.data(), res.data(), nullptr, R, V);
    return Outputs{out(y), out(copy)};
  };
  c["column_sums"] = [](const Set<T>& s) {
    const std::vector<T> x = normal<T>(70 * 130, 23); // a partial block of columns
    Outputs o;
    for (bool first : {true, false}) {
      std::vector<T> sums = start<T>(130, first);
      s.column_sums(sums.data(), first, x.data(), 70, 130);
      o.push_back(out(sums));
    }
    return o;
  };

  const std::vector<Heads> problems = attention_problems();
  auto qkv = [](const Heads& h, std::uint64_t seed) {
    return std::vector<std::vector<T>>{normal<T>(h.nq(), seed), normal<T>(h.nk(), seed + 1), normal<T>(h.nk(), seed + 2),
                                       normal<T>(h.nq(), seed + 3)};
  };
  c["attention_forward"] = [=](const Set<T>& s) {
    Outputs o;
    for (const Heads& h : problems) {
      const auto in = qkv(h, 30);
      std::vector<T> y(at(h.nq())), p(at(h.np())), y_no_p(at(h.nq()));
      s.attention_forward(y.data(), p.data(), in[0].data(), in[1].data(), in[2].data(), h.L, h.kept(), T(0.4),
                          h.dropout());
      s.attention_forward(y_no_p.data(), nullptr, in[0].data(), in[1].data(), in[2].data(), h.L, h.kept(), T(0.4),
                          h.dropout());
      o.insert(o.end(), {out(y), out(p), out(y_no_p)});
    }
    return o;
  };
  c["attention_backward"] = [=](const Set<T>& s) {
    Outputs o;
    for (const Heads& h : problems) {
      const auto in = qkv(h, 40);
      std::vector<T> y(at(h.nq())), p(at(h.np()));
      book::attention_forward<T>(y.data(), p.data(), in[0].data(), in[1].data(), in[2].data(), h.L, h.kept(), T(0.4),
                                 h.dropout());
      for (bool first : {true, false}) {
        std::vector<T> dq = start<T>(h.nq(), first), dk = start<T>(h.nk(), first), dv = start<T>(h.nk(), first);
        s.attention_backward(dq.data(), first, dk.data(), first, dv.data(), first, in[3].data(), p.data(),
                             in[0].data(), in[1].data(), in[2].data(), h.L, T(0.4), h.kept(), h.dropout());
        o.insert(o.end(), {out(dq), out(dk), out(dv)});
      }
    }
    return o;
  };
  c["flash_attention_forward"] = [=](const Set<T>& s) {
    Outputs o;
    for (const Heads& h : problems) {
      if (!h.drop.empty()) continue; // (the flash kernels take no dropout)
      const auto in = qkv(h, 50);
      std::vector<T> y(at(h.nq())), lse(at(h.L.B * h.L.H * h.L.Tq));
      s.flash_attention_forward(y.data(), lse.data(), in[0].data(), in[1].data(), in[2].data(), h.L, h.kept(), T(0.4));
      o.insert(o.end(), {out(y), out(lse)});
    }
    return o;
  };
  c["flash_attention_backward"] = [=](const Set<T>& s) {
    Outputs o;
    for (const Heads& h : problems) {
      if (!h.drop.empty()) continue;
      const auto in = qkv(h, 60);
      std::vector<T> y(at(h.nq())), lse(at(h.L.B * h.L.H * h.L.Tq));
      book::flash_attention_forward<T>(y.data(), lse.data(), in[0].data(), in[1].data(), in[2].data(), h.L, h.kept(),
                                       T(0.4));
      for (bool first : {true, false}) {
        std::vector<T> dq = start<T>(h.nq(), first), dk = start<T>(h.nk(), first), dv = start<T>(h.nk(), first);
        s.flash_attention_backward(dq.data(), first, dk.data(), first, dv.data(), first, in[3].data(), y.data(),
                                   lse.data(), in[0].data(), in[1].data(), in[2].data(), h.L, h.kept(), T(0.4));
        o.insert(o.end(), {out(dq), out(dk), out(dv)});
      }
    }
    return o;
  };

  c["adam_update"] = [](const Set<T>& s) {
    constexpr std::int64_t n = 37;
    const std::vector<T> g = normal<T>(n, 70, 3.0);
    Outputs o;
    for (const bool decoupled : {false, true})
      for (const bool amsgrad : {false, true})
        for (const bool maximize : {false, true}) {
          const kernels::AdamScalars<T> sc{T(0.9), T(0.999), T(0.1), T(0.001), T(1e-8), T(0.01), T(0.003), T(0.3),
                                           T(0.99999), maximize ? T(-1) : T(1), decoupled, T(0.7)};
          std::vector<T> w = normal<T>(n, 71), m = normal<T>(n, 72, 0.1), v = normal<T>(n, 73, 0.01), vmax(n);
          for (auto& x : v) x = x * x;
          vmax = v;
          for (int step = 0; step < 2; ++step)
            s.adam_update(w.data(), g.data(), m.data(), v.data(), amsgrad ? vmax.data() : nullptr, n, sc);
          o.insert(o.end(), {out(w), out(m), out(v), out(vmax)});
        }
    return o;
  };

  // exp, log, tanh: N(0, 10^2) values and the edges (0, -0, inf, -inf, NaN, 1000, -1000)
  auto math_inputs = [] {
    std::vector<T> x = normal<T>(37, 80, 10.0);
    for (double e : {0.0, -0.0, kInf, -kInf, kNaN, 1000.0, -1000.0}) x.push_back(T(e));
    return x;
  };
  c["exp_n"] = [=](const Set<T>& s) {
    const std::vector<T> x = math_inputs();
    std::vector<T> y(x.size());
    s.exp_n(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
    return Outputs{out(y)};
  };
  c["log_n"] = [=](const Set<T>& s) {
    std::vector<T> x = math_inputs(), y(x.size());
    for (std::size_t i = 0; i < 37; ++i) x[i] = std::abs(x[i]) * T(100) + T(1e-30);
    s.log_n(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
    return Outputs{out(y)};
  };
  c["tanh_n"] = [=](const Set<T>& s) {
    const std::vector<T> x = math_inputs();
    std::vector<T> y(x.size());
    s.tanh_n(y.data(), x.data(), static_cast<std::int64_t>(x.size()));
    return Outputs{out(y)};
  };
  c["gelu_rows"] = [](const Set<T>& s) {
    const std::vector<T> z = normal<T>(3 * 21, 81, 3.0), bias = normal<T>(21, 82);
    Outputs o;
    for (auto form : {kernels::GeluForm::erf, kernels::GeluForm::tanh}) {
      std::vector<T> y(z.size()), d(z.size()), in_place = z;
      s.gelu_rows(y.data(), d.data(), z.data(), bias.data(), 3, 21, form);
      s.gelu_rows(in_place.data(), nullptr, in_place.data(), nullptr, 1, 63, form);
      o.insert(o.end(), {out(y), out(d), out(in_place)});
    }
    return o;
  };

  // gemm: every transpose, beta 0 (C not read) and 0.5, a row of C alone (m = 1), padded leading
  // dimensions
  c["gemm"] = [](const Set<T>& s) {
    Outputs o;
    for (const std::int64_t m : {5, 1})
      for (int flags = 0; flags < 8; ++flags) {
        const bool ta = flags & 1, tb = flags & 2;
        const T beta = flags & 4 ? T(0.5) : T(0);
        const std::int64_t n = 7, k = 9, lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
        const std::vector<T> a = normal<T>((ta ? k : m) * lda, 90 + flags), b = normal<T>((tb ? n : k) * ldb, 100);
        std::vector<T> cm = beta == T(0) ? std::vector<T>(at(m * ldc), T(kNaN)) : normal<T>(m * ldc, 110);
        s.gemm(ta, tb, m, n, k, T(-0.8), a.data(), lda, b.data(), ldb, beta, cm.data(), ldc);
        std::vector<double> written;
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) written.push_back(cm[at(i * ldc + j)]);
        o.push_back(written);
      }
    return o;
  };
  // matmul: broadcast batches, a transposed operand, an operand BLAS cannot read (every other column)
  struct Operands {
    std::vector<std::int64_t> a_shape, a_strides, b_shape, b_strides;
  };
  const std::vector<Operands> matmuls = {
      {{2, 1, 3, 4}, {12, 12, 4, 1}, {5, 4, 2}, {8, 2, 1}},   // batch (2, 5) from (2, 1) and (5)
      {{2, 3, 4}, {12, 4, 1}, {4, 5}, {5, 1}},                // a shared B: the fold
      {{3, 4}, {1, 3}, {2, 4, 5}, {20, 5, 1}},                // A read transposed, B's batch alone
      {{2, 3, 4}, {24, 8, 2}, {2, 4, 3}, {12, 3, 1}}};        // A every other column: copied first
  auto matmul_shapes = [](const Operands& o) {
    kernels::MatmulShapes m;
    m.a_rank = static_cast<int>(o.a_shape.size());
    m.b_rank = static_cast<int>(o.b_shape.size());
    std::copy(o.a_shape.begin(), o.a_shape.end(), m.a_shape);
    std::copy(o.a_strides.begin(), o.a_strides.end(), m.a_strides);
    std::copy(o.b_shape.begin(), o.b_shape.end(), m.b_shape);
    std::copy(o.b_strides.begin(), o.b_strides.end(), m.b_strides);
    return m;
  };
  auto numel = [](const std::vector<std::int64_t>& shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  };
  // the output's elements: its batch (from the test's shapes) times M N
  const std::vector<std::int64_t> c_size = {2 * 5 * 3 * 2, 2 * 3 * 5, 2 * 3 * 5, 2 * 3 * 3};
  c["matmul_forward"] = [=](const Set<T>& s) {
    Outputs o;
    for (std::size_t i = 0; i < matmuls.size(); ++i) {
      const std::vector<T> a = normal<T>(64, 140 + i), b = normal<T>(64, 150 + i);
      std::vector<T> y(at(c_size[i]), T(kNaN));
      s.matmul_forward(y.data(), a.data(), b.data(), matmul_shapes(matmuls[i]), T(0.5));
      o.push_back(out(y));
    }
    return o;
  };
  c["matmul_backward_a"] = [=](const Set<T>& s) {
    Outputs o;
    for (std::size_t i = 0; i < matmuls.size(); ++i)
      for (bool first : {true, false}) {
        const std::vector<T> b = normal<T>(64, 160 + i), dc = normal<T>(c_size[i], 170 + i);
        std::vector<T> da = start<T>(numel(matmuls[i].a_shape), first);
        s.matmul_backward_a(da.data(), first, dc.data(), b.data(), matmul_shapes(matmuls[i]), T(0.5));
        o.push_back(out(da));
      }
    return o;
  };
  c["matmul_backward_b"] = [=](const Set<T>& s) {
    Outputs o;
    for (std::size_t i = 0; i < matmuls.size(); ++i)
      for (bool first : {true, false}) {
        const std::vector<T> a = normal<T>(64, 180 + i), dc = normal<T>(c_size[i], 190 + i);
        std::vector<T> db = start<T>(numel(matmuls[i].b_shape), first);
        s.matmul_backward_b(db.data(), first, a.data(), dc.data(), matmul_shapes(matmuls[i]), T(0.5));
        o.push_back(out(db));
      }
    return o;
  };
  c["square_sum"] = [](const Set<T>& s) {
    const std::vector<T> x = normal<T>(1003, 130);
    return Outputs{{s.square_sum(x.data(), 1003), s.square_sum(x.data(), 0)}};
  };
  return c;
}

// The names of the list, in its order.
std::vector<std::string> listed_kernels() {
  std::vector<std::string> names;
#define HEADGRAD_NAME_OF(RET, NAME, PARAMS, ARGS) names.push_back(#NAME);
  HEADGRAD_KERNELS(HEADGRAD_NAME_OF)
#undef HEADGRAD_NAME_OF
  return names;
}

} // namespace

TEST_CASE("kernel table: every kernel of the list has a case, and every case is a kernel of the list") {
  const std::vector<std::string> listed = listed_kernels();
  std::set<std::string> with_case;
  for (const auto& [name, c] : cases<float>()) with_case.insert(name);
  for (const std::string& name : listed) {
    INFO("kernel ", name, " is in the list (framework/engine/kernels.hpp) but has no case here");
    CHECK(with_case.count(name) == 1);
  }
  CHECK(with_case.size() == std::set<std::string>(listed.begin(), listed.end()).size());
  CHECK(cases<double>().size() == with_case.size());
}

TEST_CASE_TEMPLATE("kernel table: every engine kernel equals its book loop, on every instruction set", T, float,
                   double) {
  const Set<T>& book = kernels::book_table().of<T>();
  for (runtime::Isa isa : runtime::supported_isas()) {
    const Set<T>& engine = engine::isa_table(isa).kernels.of<T>();
    for (const auto& [name, run] : cases<T>()) {
      const double d = difference(run(engine), run(book));
      INFO(runtime::isa_name(isa), ": ", name, " differs from book::", name, " by ", d);
      CHECK(d <= tolerance<T>());
    }
  }
}

// Plausible slips, each of which the cases must catch: a softmax that ignores the lengths, a layer
// norm backward without its mean(g xhat) term, a gemm that ignores beta.
template <typename T> void masked_ignored(T* y, const T* x, const std::int64_t*, const std::uint8_t* keep,
                                          std::int64_t rows, std::int64_t cols) {
  book::softmax_forward<T>(y, x, nullptr, keep, rows, cols);
}
template <typename T>
void no_mean_term(T* dx, bool dx_first, T* dw, bool dw_first, T* db, bool db_first, const T* dy, const T* x,
                  const T* w, const T* stats, std::int64_t rows, std::int64_t D) {
  book::layer_norm_backward<T>(dx, dx_first, dw, dw_first, db, db_first, dy, x, w, stats, rows, D);
  for (std::int64_t r = 0; r < rows && dx; ++r) {
    T mgx = 0;
    for (std::int64_t i = 0; i < D; ++i)
      mgx += dy[r * D + i] * w[i] * (x[r * D + i] - stats[2 * r]) * stats[2 * r + 1] / static_cast<T>(D);
    for (std::int64_t i = 0; i < D; ++i) // (put back what the formula takes off)
      dx[r * D + i] += stats[2 * r + 1] * (x[r * D + i] - stats[2 * r]) * stats[2 * r + 1] * mgx;
  }
}
template <typename T>
void beta_ignored(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                  std::int64_t lda, const T* b, std::int64_t ldb, T, T* c, std::int64_t ldc) {
  book::gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
}

TEST_CASE_TEMPLATE("kernel table: a deliberately wrong loop fails its case (negative control)", T, float, double) {
  const Set<T>& book = kernels::book_table().of<T>();
  const auto all = cases<T>();
  Set<T> wrong = book;
  wrong.softmax_forward = &masked_ignored<T>;
  wrong.layer_norm_backward = &no_mean_term<T>;
  wrong.gemm = &beta_ignored<T>;
  for (const char* name : {"softmax_forward", "layer_norm_backward", "gemm"}) {
    const double d = difference(all.at(name)(wrong), all.at(name)(book));
    INFO(name, ": ", d);
    CHECK(d > tolerance<T>());
  }
  CHECK(difference(all.at("softmax_backward")(wrong), all.at("softmax_backward")(book)) == 0); // the rest untouched
}
