// clock.hpp - the one clock headgrad times with: seconds of the monotonic (steady) clock, for
// differences only (the profiler, the trainer's tokens/s, the ranks' timeouts, the benchmark).
#pragma once
#include <chrono>

namespace headgrad::runtime {

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace headgrad::runtime
