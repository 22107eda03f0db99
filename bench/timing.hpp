// timing.hpp - the benchmark's clock and the median it reports timings by.
#pragma once
#include <vector>

namespace headgrad::bench {

// Seconds on the steady clock (for differences).
double now_seconds();
// The median of `v` (0 if empty).
double median(std::vector<double> v);

} // namespace headgrad::bench
