#include "framework/engine/runtime/team_meet.hpp"

#include <omp.h>

namespace headgrad::runtime {

void TeamMeet::arrive_and_wait() {
  const int team = omp_get_num_threads();
  const bool all = arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 >= team ||
                   wait_awake([&] { return arrived_.load(std::memory_order_acquire) >= team; }, kMaxSpinSeconds);
  if (all) met_.fetch_add(1, std::memory_order_relaxed);
  // (else on to OpenMP's barrier, asleep)
}

} // namespace headgrad::runtime
