// train/sample/sampling.hpp: multinomial and sample_logits. Empirical frequencies are checked
// with Pearson's chi-square statistic against the distribution the draws should follow, at a
// bound far in the tail (p < 1e-5 for the degrees of freedom used), and each such check has a
// negative control: the same counts against a slightly wrong distribution must exceed the bound,
// so a sampler that is off by that much cannot pass.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "framework/ops/ops.hpp"
#include "train/sample/sampling.hpp"
#include "framework/core/random.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::contains;
using test_support::error_of;
using test_support::randn;

namespace {

using V = std::vector<double>;

// Pearson's chi-square sum over categories of (count - n p)^2 / (n p), for categories with p > 0.
double chi_square(const std::vector<std::int64_t>& counts, const V& p) {
  double n = 0, total_p = 0;
  for (auto c : counts) n += static_cast<double>(c);
  for (double q : p) total_p += q;
  double x2 = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    const double expected = n * p[i] / total_p;
    x2 += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) / expected;
  }
  return x2;
}

// The chi-square bound for up to 9 degrees of freedom: P(X2 > 40) < 1e-5 there (dof 9: 7e-6).
constexpr double kChiSquareBound = 40;

std::vector<std::int64_t> histogram(const std::vector<std::int64_t>& draws, std::size_t n) {
  std::vector<std::int64_t> counts(n, 0);
  for (auto d : draws) {
    REQUIRE(d >= 0);
    REQUIRE(d < static_cast<std::int64_t>(n));
    ++counts[d];
  }
  return counts;
}

// softmax(x / T) restricted to `keep` (all when empty), in double.
V softmax_of(const V& x, double T, const std::set<std::size_t>& keep = {}) {
  V w(x.size(), 0.0);
  double m = -INFINITY, s = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (keep.empty() || keep.count(i)) m = std::max(m, x[i]);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (keep.empty() || keep.count(i)) s += w[i] = std::exp((x[i] - m) / T);
  for (double& v : w) v /= s;
  return w;
}

// The negative control's "slightly wrong" distribution: p with a tenth of its second most likely
// category's probability moved to its most likely one. For n draws the chi-square statistic of
// counts that follow p, taken against this, is about dof + n (0.1 p2)^2 (1/p1 + 1/p2) >=
// dof + 0.01 n p2 - several times the bound for the n and p used here.
V perturbed(V p) {
  std::vector<std::size_t> order(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
  REQUIRE(p[order[1]] > 0);
  const double d = 0.1 * p[order[1]];
  p[order[0]] += d;
  p[order[1]] -= d;
  return p;
}

} // namespace

TEST_CASE("multinomial: the same seed gives the same draws - another seed others") {
  const Tensor probs = Tensor::from({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}, {2, 4});
  Generator a(5), b(5), c(6);
  const auto da = ops::multinomial(probs, 50, true, a).to_int_vector();
  CHECK(da == ops::multinomial(probs, 50, true, b).to_int_vector());
  CHECK(da != ops::multinomial(probs, 50, true, c).to_int_vector());
  CHECK(ops::multinomial(probs, 50, true, a).to_int_vector() != da); // the stream moves on
  const Tensor out = ops::multinomial(probs, 3, false, b);
  CHECK(out.dtype() == DType::i64);
  CHECK(out.shape() == Dims{2, 3});
  CHECK(ops::multinomial(Tensor::from({1, 2}, {2}), 7, true, b).shape() == Dims{7});
}

TEST_CASE("multinomial with replacement: frequencies match the probabilities") {
  // weights need not sum to 1; a zero weight is never drawn
  const V w = {1, 2, 3, 4, 0, 10};
  for (DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    Generator gen(11);
    const auto draws = ops::multinomial(Tensor::from(w, {6}, dtype), 100000, true, gen).to_int_vector();
    const auto counts = histogram(draws, w.size());
    CHECK(counts[4] == 0);
    const double x2 = chi_square(counts, w); // 4 degrees of freedom
    MESSAGE("chi-square " << x2 << " (4 dof), against a 5% shifted distribution " << chi_square(counts, perturbed(w)));
    CHECK(x2 < kChiSquareBound);
    CHECK(chi_square(counts, perturbed(w)) > kChiSquareBound);
  }
}

TEST_CASE("multinomial rows draw from their own distributions") {
  const Tensor probs = Tensor::from({0, 0, 1, 0.5, 0.5, 0}, {2, 3});
  Generator gen(3);
  const auto d = ops::multinomial(probs, 1000, true, gen).to_int_vector();
  for (std::size_t i = 0; i < 1000; ++i) CHECK(d[i] == 2);
  const auto second = histogram(std::vector<std::int64_t>(d.begin() + 1000, d.end()), 3);
  CHECK(second[2] == 0);
  CHECK(chi_square(second, {0.5, 0.5, 0}) < kChiSquareBound);
}

TEST_CASE("multinomial without replacement: distinct draws and the sequential law") {
  Generator gen(21);
  // all nonzero drawn: a permutation of them
  const auto perm = ops::multinomial(Tensor::from({1, 0, 2, 3, 4}, {5}), 4, false, gen).to_int_vector();
  CHECK(std::set<std::int64_t>(perm.begin(), perm.end()) == std::set<std::int64_t>{0, 2, 3, 4});
  // weights (6, 3, 1): the first draw follows them, the second is drawn from what is left, so
  // P(second = 0) = P(first = 1) 6/7 + P(first = 2) 6/9 = 3/10 * 6/7 + 1/10 * 6/9
  const V w = {6, 3, 1};
  std::vector<std::int64_t> first(3, 0), second(3, 0);
  for (int t = 0; t < 20000; ++t) {
    const auto d = ops::multinomial(Tensor::from(w, {3}), 2, false, gen).to_int_vector();
    REQUIRE(d[0] != d[1]);
    ++first[d[0]];
    ++second[d[1]];
  }
  CHECK(chi_square(first, w) < kChiSquareBound);
  const V p_second = {3.0 / 10 * 6.0 / 7 + 1.0 / 10 * 6.0 / 9, 6.0 / 10 * 3.0 / 4 + 1.0 / 10 * 3.0 / 9, 6.0 / 10 * 1.0 / 4 + 3.0 / 10 * 1.0 / 7};
  CHECK(std::abs(p_second[0] + p_second[1] + p_second[2] - 1) < 1e-12);
  CHECK(chi_square(second, p_second) < kChiSquareBound);
  CHECK(chi_square(second, w) > kChiSquareBound); // the second draw does not follow w itself
}

TEST_CASE("multinomial: bad probabilities and counts throw naming the function") {
  Generator gen(1);
  const auto bad = [&](const Tensor& p, std::int64_t n, bool repl, const std::string& part) {
    const std::string msg = error_of<std::invalid_argument>([&] { ops::multinomial(p, n, repl, gen); });
    CHECK(contains(msg, "multinomial"));
    CHECK_MESSAGE(contains(msg, part), msg);
  };
  bad(Tensor::from({0.5, -0.1, 0.6}, {3}), 1, true, ">= 0");
  bad(Tensor::from({0.5, std::nan(""), 0.6}, {3}), 1, true, "nan");
  bad(Tensor::from({0.5, INFINITY}, {2}), 1, true, "inf");
  bad(Tensor::from({0.5, 0.5, 0, 0}, {2, 2}), 1, true, "row 1 sums to 0");
  bad(Tensor::from({1, 1, 0}, {3}), 3, false, "exceeds the 2 nonzero");
  bad(Tensor::from({1, 1}, {2}), 0, true, "num_samples");
  bad(Tensor::from({1, 1}, {2}), -3, true, "num_samples");
  bad(Tensor::zeros({1, 1, 2}), 1, true, "1-D or 2-D");
  bad(Tensor::zeros({2, 0}), 1, true, "no categories");
  bad(Tensor::from_ints({1, 2}, {2}), 1, true, "float32 or float64");
  bad(Tensor(), 1, true, "undefined");
}

TEST_CASE("sample_logits: frequencies follow softmax of logits over temperature") {
  const V logits = {1.0, -0.5, 2.0, 0.0, -INFINITY, 0.7};
  for (double T : {1.0, 0.5, 2.5}) {
    CAPTURE(T);
    Generator gen(31);
    // 100000 rows in one call: one draw per row
    std::vector<double> batch;
    for (int r = 0; r < 100000; ++r) batch.insert(batch.end(), logits.begin(), logits.end());
    const Tensor out = ops::sample_logits(Tensor::from(batch, {500, 200, 6}, DType::f64), {T, std::nullopt}, gen);
    CHECK(out.shape() == Dims{500, 200});
    CHECK(out.dtype() == DType::i64);
    const auto counts = histogram(out.to_int_vector(), logits.size());
    CHECK(counts[4] == 0); // -inf is never drawn
    const V p = softmax_of(logits, T);
    MESSAGE("T " << T << ": chi-square " << chi_square(counts, p) << ", against the perturbed "
                 << chi_square(counts, perturbed(p)));
    CHECK(chi_square(counts, p) < kChiSquareBound);
    CHECK(chi_square(counts, perturbed(p)) > kChiSquareBound);
    // temperature matters: the counts do not follow the untempered softmax
    if (T != 1.0) CHECK(chi_square(counts, softmax_of(logits, 1.0)) > kChiSquareBound);
  }
}

TEST_CASE("sample_logits top_k: never outside the k largest - frequencies renormalised over them") {
  const V rows = randn({2, 10}, 41).to_vector();
  // 100000 copies of the two rows, one draw each
  V batch;
  for (int t = 0; t < 100000; ++t) batch.insert(batch.end(), rows.begin(), rows.end());
  const Tensor logits = Tensor::from(batch, {100000, 2, 10}, DType::f32);
  for (std::int64_t k : {1, 3, 10}) {
    CAPTURE(k);
    Generator gen(42);
    const auto d = ops::sample_logits(logits, {0.8, k}, gen).to_int_vector();
    for (std::size_t r = 0; r < 2; ++r) {
      std::vector<std::int64_t> draws;
      for (std::size_t t = r; t < d.size(); t += 2) draws.push_back(d[t]);
      const auto counts = histogram(draws, 10);
      const V row(rows.begin() + r * 10, rows.begin() + (r + 1) * 10);
      std::vector<std::size_t> order(10);
      for (std::size_t i = 0; i < 10; ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
      const std::set<std::size_t> top(order.begin(), order.begin() + k);
      for (std::size_t i = 0; i < 10; ++i)
        if (!top.count(i)) CHECK_MESSAGE(counts[i] == 0, "row " << r << " drew index " << i << " outside the top " << k);
      // (the float32 logits, rounded, are what the sampler sees)
      V row32;
      for (double v : row) row32.push_back(static_cast<float>(v));
      const V p = softmax_of(row32, 0.8, top);
      CHECK(chi_square(counts, p) < kChiSquareBound);
      if (k > 1) {
        MESSAGE("k " << k << " row " << r << ": chi-square " << chi_square(counts, p) << ", against the perturbed "
                     << chi_square(counts, perturbed(p)));
        CHECK(chi_square(counts, perturbed(p)) > kChiSquareBound);
      }
    }
  }
  // ties at the k-th place go to the lower index, as topk: exactly k candidates
  Generator gen(5);
  for (int t = 0; t < 200; ++t) {
    const auto d = ops::sample_logits(Tensor::from({1, 1, 1, 1}, {4}), {1.0, 2}, gen).to_int_vector();
    CHECK(d[0] <= 1);
  }
}

TEST_CASE("sample_logits: temperature 0 is the argmax and draws nothing") {
  const Tensor logits = randn({3, 5, 17}, 51, DType::f32);
  Generator gen(9), untouched(9);
  const Tensor greedy = ops::sample_logits(logits, {0.0, std::nullopt}, gen);
  CHECK(greedy.shape() == Dims{3, 5});
  CHECK(greedy.to_int_vector() == ops::argmax(logits, -1).to_int_vector());
  CHECK(ops::sample_logits(logits, {0.0, 4}, gen).to_int_vector() == greedy.to_int_vector());
  CHECK(gen.next_u64() == untouched.next_u64());
  // ties: the first index, as argmax
  CHECK(ops::sample_logits(Tensor::from({0, 3, 3, -INFINITY}, {4}), {0.0, std::nullopt}, gen).item() == 1);
  // a 1-D row gives a 0-d index
  CHECK(ops::sample_logits(Tensor::from({0, 3}, {2}), {0.0, std::nullopt}, gen).dim() == 0);
}

TEST_CASE("sample_logits: the same seed gives the same tokens") {
  const Tensor logits = randn({8, 30}, 61);
  Generator a(77), b(77), c(78);
  const ops::SampleOptions o{0.9, 5};
  const auto da = ops::sample_logits(logits, o, a).to_int_vector();
  CHECK(da == ops::sample_logits(logits, o, b).to_int_vector());
  CHECK(da != ops::sample_logits(logits, o, c).to_int_vector());
}

TEST_CASE("sample_logits: bad logits and options throw naming the function") {
  Generator gen(1);
  const Tensor ok = Tensor::from({0.1, 0.2, 0.3}, {1, 3});
  const auto bad = [&](const Tensor& x, ops::SampleOptions o, const std::string& part) {
    const std::string msg = error_of<std::invalid_argument>([&] { ops::sample_logits(x, o, gen); });
    CHECK(contains(msg, "sample_logits"));
    CHECK_MESSAGE(contains(msg, part), msg);
  };
  bad(ok, {-1.0, std::nullopt}, "temperature");
  bad(ok, {std::nan(""), std::nullopt}, "temperature");
  bad(ok, {INFINITY, std::nullopt}, "temperature");
  bad(ok, {1.0, 0}, "top_k = 0 is outside [1, 3]");
  bad(ok, {1.0, 4}, "top_k = 4 is outside [1, 3]");
  bad(Tensor::from({0.1, std::nan(""), 0.3}, {3}), {}, "nan");
  bad(Tensor::from({0.1, INFINITY, 0.3}, {3}), {0.0, std::nullopt}, "inf");
  bad(Tensor::from({0, 0, -INFINITY, -INFINITY}, {2, 2}), {}, "row 1 is all -inf");
  bad(Tensor::from_ints({1, 2}, {2}), {}, "float32 or float64");
  bad(Tensor::scalar(1.0), {}, "0-d");
  bad(Tensor::zeros({2, 0}), {}, "no categories");
  bad(Tensor(), {}, "undefined");
}
