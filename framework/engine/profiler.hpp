// profiler.hpp - optional per-op timing (`headgrad train --profile`, the benchmark's profile).
// Off unless enabled: a disabled timer costs one branch. Ops time their forward with OpTimer;
// the autograd engine times each node's backward. Only the outermost running timer counts, so
// an op that calls other ops (linear calling contiguous(), a backward built from ops) is
// charged once, under its own name. Only the thread that enabled the profiler is timed (with the
// batch split over threads, that is the first thread's share of the step).
#pragma once
#include <cstdint>
#include <vector>

#include "framework/engine/kernels.hpp"

namespace headgrad {

struct OpProfile {
  const char* name;
  std::int64_t forward_calls, backward_calls;
  double forward_seconds, backward_seconds;
};

void profiler_enable(bool on);
bool profiler_enabled();
void profiler_reset();
std::vector<OpProfile> profiler_report(); // one row per op name, in name order

// The workers of a step that runs its batch's shards on several threads at once
// (train/loop/train_step.cpp): the step lasts as long as its slowest worker, so a worker slower than
// the others on the same work (its CPU shared with other work, or a slower core) costs every
// worker that much time.
struct WorkersProfile {
  std::int64_t steps = 0;       // steps reported
  std::vector<double> seconds;  // each worker's time until it finished its shards (from the step's call
                                // to the team, so a late start counts), summed over the steps
  double slowest_seconds = 0;   // summed over the steps: the slowest worker's time, the step's share in shards
  double wait_seconds = 0;      // summed over the steps: how long the fastest worker waited for the slowest
};
// Adds one step's worker times (seconds[i]: worker i's, on the thread that enabled the profiler).
void profiler_add_workers(const std::vector<double>& seconds);
WorkersProfile profiler_workers();

// OpTimer and OpPart, the timers the ops and the autograd engine start, are declared in the seam
// (framework/engine/kernels.hpp), the one engine header the book includes.

} // namespace headgrad
