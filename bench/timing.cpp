#include "bench/timing.hpp"

#include "framework/engine/runtime/clock.hpp"

#include <algorithm>
#include <chrono>

namespace headgrad::bench {

double now_seconds() { return runtime::seconds_now(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace headgrad::bench
