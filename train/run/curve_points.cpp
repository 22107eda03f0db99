#include "train/run/curve_points.hpp"

#include <algorithm>

namespace headgrad::train {
namespace {

// The mean of a and b's rows (a first): its steps span both.
template <std::size_t N>
typename ThinnedSeries<N>::Point merged(const typename ThinnedSeries<N>::Point& a,
                                        const typename ThinnedSeries<N>::Point& b) {
  typename ThinnedSeries<N>::Point m;
  m.first_step = a.first_step;
  m.step = b.step;
  m.rows = a.rows + b.rows;
  const double wa = static_cast<double>(a.rows) / static_cast<double>(m.rows);
  for (std::size_t k = 0; k < N; ++k) m.values[k] = wa * a.values[k] + (1 - wa) * b.values[k];
  return m;
}

} // namespace

template <std::size_t N> void ThinnedSeries<N>::add(std::int64_t step, const std::array<double, N>& values) {
  if (pending_.rows == 0) {
    pending_ = Point{step, step, values, 1};
  } else {
    Point one{step, step, values, 1};
    pending_ = merged<N>(pending_, one);
  }
  last_step_ = step;
  if (pending_.rows == width_) push_pending();
}

template <std::size_t N> void ThinnedSeries<N>::push_pending() {
  full_.push_back(pending_);
  pending_ = Point{};
  if (full_.size() < 2 * kCurvePoints) return;
  // full: merge neighbours, each point now stands for twice the rows
  for (std::size_t i = 0; i < kCurvePoints; ++i) full_[i] = merged<N>(full_[2 * i], full_[2 * i + 1]);
  full_.resize(kCurvePoints);
  width_ *= 2;
}

template <std::size_t N> void ThinnedSeries<N>::cut_from(std::int64_t step) {
  if (pending_.rows > 0 && pending_.step >= step) pending_ = Point{};
  while (!full_.empty() && full_.back().step >= step) full_.pop_back();
  last_step_ = pending_.rows > 0 ? pending_.step : full_.empty() ? -1 : full_.back().step;
}

template <std::size_t N> std::vector<typename ThinnedSeries<N>::Point> ThinnedSeries<N>::points() const {
  std::vector<Point> out = full_;
  if (pending_.rows > 0) out.push_back(pending_);
  return out;
}

template class ThinnedSeries<2>;
template class ThinnedSeries<3>;

} // namespace headgrad::train
