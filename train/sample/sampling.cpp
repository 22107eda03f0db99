// sampling.cpp - multinomial and sample_logits (see sampling.hpp). Both reduce to one step:
// draw an index with probability w_i / sum(w) from non-negative weights w, by inverting the
// cumulative sums with one uniform number.
#include "train/sample/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace headgrad::ops {
namespace {

// The index i with cdf[i-1] <= u < cdf[i] for u uniform in [0, total): weight w_i is drawn with
// probability w_i / total, and a zero weight (cdf[i] == cdf[i-1]) never. `cdf` is the running
// sum of the weights, its last element the total (> 0).
std::int64_t draw_from_cdf(const std::vector<double>& cdf, Generator& gen) {
  const double u = gen.uniform() * cdf.back();
  auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
  if (it == cdf.end()) { // u rounded up to the total: the last index with a positive weight
    it = std::prev(cdf.end());
    while (it != cdf.begin() && *std::prev(it) == *it) --it;
  }
  return it - cdf.begin();
}

std::vector<double> running_sum(const std::vector<double>& w) {
  std::vector<double> cdf(w.size());
  std::partial_sum(w.begin(), w.end(), cdf.begin());
  return cdf;
}

void require_float(const Tensor& x, const char* fn, const char* what) {
  if (!x.defined()) throw std::invalid_argument(fmt::format("{}: {} is an undefined tensor", fn, what));
  if (!is_float(x.dtype()))
    throw std::invalid_argument(
        fmt::format("{}: {} must be float32 or float64, got {} {}", fn, what, dtype_name(x.dtype()), x.shape()));
}

// The rows of `probs` checked as torch.multinomial checks them.
std::vector<std::vector<double>> probability_rows(const Tensor& probs) {
  require_float(probs, "multinomial", "probs");
  if (probs.dim() != 1 && probs.dim() != 2)
    throw std::invalid_argument(fmt::format("multinomial: probs must be 1-D or 2-D, got {}", probs.shape()));
  const std::int64_t n = probs.shape()[probs.dim() - 1];
  if (n == 0) throw std::invalid_argument(fmt::format("multinomial: probs {} has no categories", probs.shape()));
  const std::vector<double> v = probs.to_vector();
  std::vector<std::vector<double>> rows;
  for (std::size_t r = 0; r * n < v.size(); ++r) {
    std::vector<double> row(v.begin() + r * n, v.begin() + (r + 1) * n);
    for (double p : row)
      if (!(p >= 0.0) || std::isinf(p))
        throw std::invalid_argument(fmt::format(
            "multinomial: probs {} row {} holds {}: every probability must be finite and >= 0", probs.shape(), r, p));
    if (std::accumulate(row.begin(), row.end(), 0.0) <= 0.0)
      throw std::invalid_argument(fmt::format("multinomial: probs {} row {} sums to 0", probs.shape(), r));
    rows.push_back(std::move(row));
  }
  return rows;
}

// The indices of the k largest values, ties to the lower index.
std::vector<std::int64_t> top_indices(const std::vector<double>& x, std::int64_t k) {
  std::vector<std::int64_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&x](std::int64_t a, std::int64_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  idx.resize(k);
  return idx;
}

// One draw from softmax(row / temperature) over the top-k entries (all when top_k is empty).
std::int64_t sample_row(const std::vector<double>& row, const SampleOptions& o, Generator& gen) {
  const std::int64_t V = static_cast<std::int64_t>(row.size());
  if (o.temperature == 0.0) return std::max_element(row.begin(), row.end()) - row.begin(); // first max
  std::vector<double> w(V, 0.0);
  std::vector<std::int64_t> kept(V);
  std::iota(kept.begin(), kept.end(), 0);
  if (o.top_k) kept = top_indices(row, *o.top_k);
  double m = -INFINITY;
  for (std::int64_t i : kept) m = std::max(m, row[i]);
  // w_i = exp((x_i - max) / T): the softmax's numerator, shifted so the largest is exp(0) = 1
  for (std::int64_t i : kept) w[i] = std::exp((row[i] - m) / o.temperature);
  return draw_from_cdf(running_sum(w), gen);
}

} // namespace

Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement, Generator& gen) {
  std::vector<std::vector<double>> rows = probability_rows(probs);
  if (num_samples <= 0)
    throw std::invalid_argument(fmt::format("multinomial: num_samples must be positive, got {}", num_samples));
  std::vector<std::int64_t> out;
  out.reserve(rows.size() * num_samples);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::vector<double>& w = rows[r];
    if (!replacement) {
      const auto nonzero = std::count_if(w.begin(), w.end(), [](double p) { return p > 0.0; });
      if (num_samples > nonzero)
        throw std::invalid_argument(
            fmt::format("multinomial: without replacement, num_samples ({}) exceeds the {} nonzero probabilities "
                        "of probs {} row {}",
                        num_samples, nonzero, probs.shape(), r));
    }
    const std::vector<double> cdf = running_sum(w);
    for (std::int64_t s = 0; s < num_samples; ++s) {
      if (replacement) {
        out.push_back(draw_from_cdf(cdf, gen));
        continue;
      }
      const std::int64_t i = draw_from_cdf(running_sum(w), gen);
      out.push_back(i);
      w[i] = 0.0; // drawn: out of the remaining weights
    }
  }
  return Tensor::from_ints(out, probs.dim() == 1 ? Dims{num_samples}
                                                 : Dims{static_cast<std::int64_t>(rows.size()), num_samples});
}

Tensor sample_logits(const Tensor& logits, const SampleOptions& o, Generator& gen) {
  require_float(logits, "sample_logits", "logits");
  if (logits.dim() == 0)
    throw std::invalid_argument("sample_logits: logits must have at least one axis (the categories), got a 0-d tensor");
  const std::int64_t V = logits.shape()[logits.dim() - 1];
  if (V == 0) throw std::invalid_argument(fmt::format("sample_logits: logits {} have no categories", logits.shape()));
  if (!(o.temperature >= 0.0) || std::isinf(o.temperature))
    throw std::invalid_argument(
        fmt::format("sample_logits: temperature must be finite and >= 0 (0 = greedy), got {}", o.temperature));
  if (o.top_k && (*o.top_k < 1 || *o.top_k > V))
    throw std::invalid_argument(
        fmt::format("sample_logits: top_k = {} is outside [1, {}] for logits {}", *o.top_k, V, logits.shape()));
  const std::vector<double> v = logits.to_vector();
  std::vector<std::int64_t> out;
  for (std::size_t r = 0; r * V < v.size(); ++r) {
    const std::vector<double> row(v.begin() + r * V, v.begin() + (r + 1) * V);
    bool any_finite = false;
    for (double x : row) {
      if (std::isnan(x) || x == INFINITY)
        throw std::invalid_argument(
            fmt::format("sample_logits: logits {} row {} holds {}: logits must be finite or -inf", logits.shape(), r, x));
      any_finite = any_finite || x > -INFINITY;
    }
    if (!any_finite)
      throw std::invalid_argument(fmt::format("sample_logits: logits {} row {} is all -inf", logits.shape(), r));
    out.push_back(sample_row(row, o, gen));
  }
  Dims batch = logits.shape();
  batch.pop_back();
  return Tensor::from_ints(out, batch);
}

} // namespace headgrad::ops
