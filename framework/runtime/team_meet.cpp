#include "framework/runtime/team_meet.hpp"

#include <omp.h>

#include "framework/runtime/clock.hpp"

namespace headgrad::runtime {

void TeamMeet::arrive_and_wait() {
  const int team = omp_get_num_threads();
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 >= team) {
    met_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const double start = seconds_now();
  for (int turn = 0;; ++turn) {
    for (int i = 0; i < 64; ++i) spin_pause();
    if (arrived_.load(std::memory_order_acquire) >= team) {
      met_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if ((turn & 15) == 15 && seconds_now() - start > kMaxSpinSeconds) return; // on to OpenMP's barrier
  }
}

} // namespace headgrad::runtime
