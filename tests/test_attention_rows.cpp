// test_attention_rows.cpp - the row kernels of attention (framework/engine/kernels/attention_rows.hpp),
// which attention_forward / attention_backward run for short sequences without keep flags or
// dropout, against the book's loops in double over every key (masked weights 0 included, as the
// gemms multiply them), on every instruction-set copy this CPU runs: causal and
// valid-length masks, rows that keep nothing, cross-attention shapes, gradients added on a
// second write, and the NaN and infinity cases where skipping masked keys would differ from
// multiplying by their zeros (the kernels then leave the pair to the gemms).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "framework/core/random.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/kernel_table.hpp"
#include "framework/engine/runtime/cpu_isa.hpp"

using namespace headgrad;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One problem: B batch rows of H heads, Q (B, Tq, H*dh), K and V (B, Tk, H*dh), dO like Q, and
// each query row's kept-key length (empty: every key).
struct Problem {
  std::int64_t B, H, Tq, Tk, dh;
  std::vector<double> q, k, v, dout;
  std::vector<std::int64_t> lens; // (B, Tq), or empty

  std::int64_t C() const { return H * dh; }
  kernels::HeadsLayout layout() const {
    kernels::HeadsLayout L;
    L.B = B, L.H = H, L.Tq = Tq, L.Tk = Tk, L.dh = dh;
    L.q_row = L.k_row = L.v_row = L.o_row = C();
    L.q_batch = L.o_batch = Tq * C();
    L.k_batch = L.v_batch = Tk * C();
    return L;
  }
};

Problem make_problem(std::int64_t B, std::int64_t H, std::int64_t Tq, std::int64_t Tk, std::int64_t dh,
                     std::uint64_t seed) {
  Problem p{B, H, Tq, Tk, dh, {}, {}, {}, {}, {}};
  Generator g(seed);
  auto fill = [&](std::vector<double>& x, std::int64_t n) {
    x.resize(static_cast<std::size_t>(n));
    for (double& e : x) e = g.normal();
  };
  fill(p.q, B * Tq * p.C());
  fill(p.k, B * Tk * p.C());
  fill(p.v, B * Tk * p.C());
  fill(p.dout, B * Tq * p.C());
  return p;
}

struct Result {
  std::vector<double> o, p, dq, dk, dv;
};

// The book's loops (framework/ops/attention.cpp) in double: the formulas over every key, masked
// weights 0 included (S = s Q Kᵀ; P = softmax over the kept keys, 0 elsewhere, a NaN or +inf kept
// score making the row NaN, nothing kept 0; O = P V; dV = Pᵀ dO; dP = dO Vᵀ; dS = P (dP -
// rowsum(dP P)) on kept keys, 0 on masked ones; dQ = s dS K; dK = s dSᵀ Q).
Result reference(const Problem& pr) {
  const kernels::HeadsLayout L = pr.layout();
  const kernels::KeptKeys kept{pr.lens.empty() ? nullptr : pr.lens.data(), nullptr};
  const double s = 1.0 / std::sqrt(static_cast<double>(pr.dh));
  Result r{std::vector<double>(pr.q.size()), std::vector<double>(static_cast<std::size_t>(pr.B * pr.H * pr.Tq * pr.Tk)),
           std::vector<double>(pr.q.size()), std::vector<double>(pr.k.size()), std::vector<double>(pr.v.size())};
  book::attention_forward<double>(r.o.data(), r.p.data(), pr.q.data(), pr.k.data(), pr.v.data(), L, kept, s, {});
  book::attention_backward<double>(r.dq.data(), true, r.dk.data(), true, r.dv.data(), true, pr.dout.data(), r.p.data(),
                                   pr.q.data(), pr.k.data(), pr.v.data(), L, s, kept, {});
  return r;
}

template <typename T> std::vector<T> as(const std::vector<double>& x) { return std::vector<T>(x.begin(), x.end()); }

// The kernels in T; with twice, the backward runs a second time adding (first_write false) onto
// the first, and the result is halved: the same gradient if the add is right.
template <typename T> Result kernels_result(const Problem& pr, bool twice = false) {
  const kernels::HeadsLayout L = pr.layout();
  const std::vector<T> q = as<T>(pr.q), k = as<T>(pr.k), v = as<T>(pr.v), dout = as<T>(pr.dout);
  std::vector<T> o(q.size()), p(static_cast<std::size_t>(pr.B * pr.H * pr.Tq * pr.Tk)), dq(q.size()), dk(k.size()),
      dv(v.size());
  const kernels::KeptKeys kept{pr.lens.empty() ? nullptr : pr.lens.data(), nullptr};
  const T scale = T(1) / std::sqrt(static_cast<T>(pr.dh));
  kernels::attention_forward<T>(o.data(), p.data(), q.data(), k.data(), v.data(), L, kept, scale, {});
  for (int pass = 0; pass < (twice ? 2 : 1); ++pass)
    kernels::attention_backward<T>(dq.data(), pass == 0, dk.data(), pass == 0, dv.data(), pass == 0, dout.data(),
                                   p.data(), q.data(), k.data(), v.data(), L, scale, kept, {});
  Result r{as<double>({o.begin(), o.end()}), {p.begin(), p.end()}, {dq.begin(), dq.end()}, {dk.begin(), dk.end()},
           {dv.begin(), dv.end()}};
  if (twice)
    for (auto* g : {&r.dq, &r.dk, &r.dv})
      for (double& x : *g) x /= 2;
  return r;
}

// |a - b| <= tol (1 + |b|) everywhere, NaN exactly where the reference is NaN.
void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  std::int64_t nan_mismatch = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      nan_mismatch += std::isnan(want[i]) != std::isnan(got[i]);
      continue;
    }
    worst = std::max(worst, std::abs(got[i] - want[i]) / (1 + std::abs(want[i])));
  }
  INFO(what, ": worst ", worst, ", NaN mismatches ", nan_mismatch);
  CHECK(worst <= tol);
  CHECK(nan_mismatch == 0);
}

template <typename T> void check_problem(const Problem& pr, bool twice = false) {
  const double tol = sizeof(T) == 4 ? 2e-6 : 1e-13;
  const Result want = reference(pr);
  const runtime::Isa before = runtime::active_isa();
  for (runtime::Isa isa : runtime::supported_isas()) {
    runtime::set_isa(isa);
    INFO(runtime::isa_name(isa), ", B ", pr.B, " H ", pr.H, " Tq ", pr.Tq, " Tk ", pr.Tk, " dh ", pr.dh);
    const Result got = kernels_result<T>(pr, twice);
    check_close(got.o, want.o, tol, "O");
    check_close(got.p, want.p, tol, "P");
    check_close(got.dq, want.dq, tol, "dQ");
    check_close(got.dk, want.dk, tol, "dK");
    check_close(got.dv, want.dv, tol, "dV");
  }
  runtime::set_isa(before);
}

void causal(Problem& p) {
  p.lens.resize(static_cast<std::size_t>(p.B * p.Tq));
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t i = 0; i < p.Tq; ++i) p.lens[static_cast<std::size_t>(b * p.Tq + i)] = i + 1;
}

} // namespace

TEST_CASE_TEMPLATE("attention rows: causal heads as a GPT runs them (T 64, d_head 32), and odd sizes", T, float,
                   double) {
  const runtime::Isa before = runtime::active_isa();
  for (runtime::Isa isa : runtime::supported_isas()) { // (so that the checks below are of them)
    runtime::set_isa(isa);
    const auto fit = engine::isa_table(isa).engine<T>().attention_rows_fit;
    CHECK(fit(64, 32));
    CHECK(fit(40, 16));
    CHECK(fit(16, 16)); // (a tiny pair: without FMA)
  }
  runtime::set_isa(before);
  for (auto [B, H, Tq, dh] :
       {std::tuple{2, 4, 64, 32}, {2, 3, 70, 8}, {1, 2, 40, 16}, {3, 1, 33, 32}, {2, 2, 16, 16}}) {
    Problem p = make_problem(B, H, Tq, Tq, dh, 7);
    causal(p);
    check_problem<T>(p);
  }
}

TEST_CASE_TEMPLATE("attention rows: valid lengths (0, partial, past the keys), no mask, cross-attention", T, float,
                   double) {
  Problem p = make_problem(2, 2, 9, 40, 16, 8); // 9 queries over 40 keys
  p.lens = {0, 1, 5, 40, 70, 16, 3, 39, 17, 21, 0, 0, 2, 9, 33, 8, 7, 1};
  check_problem<T>(p);
  Problem all = make_problem(2, 2, 12, 40, 16, 9); // no lengths: every key
  check_problem<T>(all);
}

TEST_CASE_TEMPLATE("attention rows: a second backward adds to the first", T, float, double) {
  Problem p = make_problem(2, 2, 64, 64, 32, 10);
  causal(p);
  check_problem<T>(p, true);
}

TEST_CASE_TEMPLATE("attention rows: NaN and infinity give what the gemms give (0 x inf = NaN on masked keys)", T,
                   float, double) {
  Problem base = make_problem(1, 2, 40, 40, 16, 11);
  causal(base);
  Problem inf_v = base; // an infinite value at the last key: every row's output multiplies it
  inf_v.v[static_cast<std::size_t>(39 * inf_v.C() + 3)] = INFINITY;
  check_problem<T>(inf_v);
  Problem nan_q = base; // a NaN query row: its weights NaN on every key, so every dV
  nan_q.q[static_cast<std::size_t>(4 * nan_q.C() + 1)] = kNaN;
  check_problem<T>(nan_q);
  Problem inf_do = base; // an infinite output gradient at row 2 reaches every key's dV through P's zeros
  inf_do.dout[static_cast<std::size_t>(2 * inf_do.C() + 5)] = INFINITY;
  check_problem<T>(inf_do);
  Problem inf_k = base; // an infinite key: its masked zeros in dS reach every dQ
  inf_k.k[static_cast<std::size_t>(30 * inf_k.C() + 2)] = -INFINITY;
  check_problem<T>(inf_k);
}
