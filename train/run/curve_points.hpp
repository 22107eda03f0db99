// curve_points.hpp - a run's log kept for its pictures in bounded memory: at most a fixed number
// of points per series whatever the run's length, each point the mean of a run of consecutive
// rows (a million-step run's curves.svg has as many points as a thousand-step run's).
//
// The rows of a series are averaged in buckets of w consecutive rows (w = 1 at first). When
// 2 * kCurvePoints buckets are full, neighbours are merged pairwise and w doubles, so a point
// always stands for w rows (the last one for up to w) and the points stay between kCurvePoints
// and 2 * kCurvePoints once there are that many rows: O(1) work per row, O(kCurvePoints) memory.
// A point's step is its last row's (the x position), its values the means of its rows'.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace headgrad::train {

inline constexpr std::size_t kCurvePoints = 500;

// One series: rows of N values each.
template <std::size_t N> class ThinnedSeries {
public:
  struct Point {
    std::int64_t first_step = 0, step = 0; // the rows it stands for: steps first_step .. step
    std::array<double, N> values{};        // their means
    std::int64_t rows = 0;
  };

  void add(std::int64_t step, const std::array<double, N>& values);
  // Drops every point that holds a row of step >= `step` (a log a resumed run wrote again from
  // there: the later rows win). A point holding rows on both sides goes as a whole.
  void cut_from(std::int64_t step);
  std::vector<Point> points() const; // the full buckets and the one being filled, in step order
  std::int64_t last_step() const { return last_step_; } // of the last row added (-1: none)
  std::int64_t rows_per_point() const { return width_; }

private:
  void push_pending();
  std::vector<Point> full_;
  Point pending_;
  std::int64_t width_ = 1, last_step_ = -1;
};

extern template class ThinnedSeries<2>;
extern template class ThinnedSeries<3>;

} // namespace headgrad::train
