// test_team_meet.cpp - runtime::TeamMeet and runtime::parallel_for (framework/runtime/team_meet.hpp):
// the threads of a region leave the meeting together, a thread far behind is not waited for past
// the spin bound, and parallel_for runs every index once, on the calling thread when told to.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <omp.h>
#include <thread>
#include <vector>

#include "framework/runtime/clock.hpp"
#include "framework/runtime/team_meet.hpp"

using headgrad::runtime::seconds_now;
using headgrad::runtime::TeamMeet;

namespace {

// Runs a 2-thread region in which thread 1 sleeps `late` before arriving; returns when each thread
// arrived and left (seconds_now()), and sets *team to the region's size.
struct Times {
  double arrive[2], leave[2];
  int team = 0;
};
Times meet_with_late_thread(TeamMeet& meet, std::chrono::milliseconds late) {
  Times t{};
#pragma omp parallel num_threads(2)
  {
    const int i = omp_get_thread_num();
    if (i == 0) t.team = omp_get_num_threads();
    if (i == 1) std::this_thread::sleep_for(late);
    t.arrive[i] = seconds_now();
    meet.arrive_and_wait();
    t.leave[i] = seconds_now();
  }
  return t;
}

} // namespace

TEST_CASE("team meet: the first thread waits, awake, for the last; then both go on") {
  TeamMeet meet;
  const Times t = meet_with_late_thread(meet, std::chrono::milliseconds(2));
  if (t.team < 2) return; // OpenMP gave one thread (nothing to meet)
  CHECK(t.leave[0] >= t.arrive[1]); // thread 0 left only once thread 1 had arrived
  CHECK(meet.met() == 2);           // both found the whole team there
}

TEST_CASE("team meet: a thread far behind is not waited for past the spin bound") {
  TeamMeet meet;
  const Times t = meet_with_late_thread(meet, std::chrono::milliseconds(300));
  if (t.team < 2) return;
  const double waited = t.leave[0] - t.arrive[0];
  CHECK(waited >= TeamMeet::kMaxSpinSeconds);
  CHECK(waited < 0.25);   // gave up well before thread 1 came (300 ms): OpenMP's barrier waits the rest
  CHECK(meet.met() == 1); // only the last arrival found everyone
}

TEST_CASE("team meet: outside a region, or in a team of one, it returns at once") {
  TeamMeet alone;
  alone.arrive_and_wait();
  CHECK(alone.met() == 1);
  TeamMeet one;
#pragma omp parallel num_threads(1)
  one.arrive_and_wait();
  CHECK(one.met() == 1);
}

TEST_CASE("parallel_for: every index once, over the threads or on the calling thread") {
  for (bool parallel : {true, false}) {
    INFO("parallel = " << parallel);
    constexpr std::int64_t n = 1000;
    std::vector<std::atomic<int>> seen(n);
    std::vector<int> thread_of(n, -1);
    headgrad::runtime::parallel_for(n, parallel, [&](std::int64_t i) {
      seen[static_cast<std::size_t>(i)].fetch_add(1);
      thread_of[static_cast<std::size_t>(i)] = omp_in_parallel() ? omp_get_thread_num() : -2;
    });
    for (std::int64_t i = 0; i < n; ++i) REQUIRE(seen[static_cast<std::size_t>(i)].load() == 1);
    if (!parallel)
      for (int th : thread_of) REQUIRE(th == -2); // not in a region at all: the calling thread
  }
  int calls = 0;
  headgrad::runtime::parallel_for(0, true, [&](std::int64_t) { ++calls; });
  CHECK(calls == 0);
}
