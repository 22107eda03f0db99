// test_spin_pool.cpp - the training step's threads (framework/engine/runtime/spin_pool.hpp, team_meet.hpp):
// the threads of an OpenMP region leave TeamMeet together, a thread far behind is not waited for
// past the spin bound; a SpinPool runs each job's bodies on their threads, once, with one OpenMP
// thread each, rethrows their errors, sleeps when idle; parallel_for and run_team use the current
// pool, else OpenMP, and run every index once; under OMP_PROC_BIND the pool's workers sit where
// OpenMP binds its threads, and available_cores counts every place's CPUs.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <omp.h>
#include <thread>
#include <vector>

#include "framework/engine/runtime/clock.hpp"
#include "framework/engine/runtime/spin_pool.hpp"
#include "framework/engine/runtime/team_meet.hpp"
#include "framework/engine/runtime/threads.hpp"

using headgrad::runtime::seconds_now;
using headgrad::runtime::SpinPool;
using headgrad::runtime::TeamMeet;
using headgrad::runtime::UsePool;

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

TEST_CASE("spin pool: each body on its own thread, once, with one OpenMP thread, job after job") {
  SpinPool pool(2);
  REQUIRE(pool.size() == 3);
  for (int job = 0; job < 200; ++job) { // many short jobs: none lost, none run twice
    const int n = 1 + job % 3;
    std::vector<std::atomic<int>> ran(3);
    std::vector<std::thread::id> who(3);
    std::vector<int> omp_threads(3, -1);
    pool.run(n, [&](int i) {
      ran[static_cast<std::size_t>(i)].fetch_add(1);
      who[static_cast<std::size_t>(i)] = std::this_thread::get_id();
      omp_threads[static_cast<std::size_t>(i)] = omp_get_max_threads();
    });
    for (int i = 0; i < 3; ++i) REQUIRE(ran[static_cast<std::size_t>(i)].load() == (i < n ? 1 : 0));
    REQUIRE(who[0] == std::this_thread::get_id()); // body(0) on the caller
    std::set<std::thread::id> distinct(who.begin(), who.begin() + n);
    REQUIRE(distinct.size() == static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) REQUIRE(omp_threads[static_cast<std::size_t>(i)] == 1);
  }
  CHECK(pool.jobs() == 200);
  CHECK(omp_get_max_threads() >= 1); // the caller's own setting is back (OneOmpThread restores it)
}

TEST_CASE("spin pool: an error of a body is rethrown by run, and the pool keeps working") {
  SpinPool pool(1);
  CHECK_THROWS_WITH_AS(pool.run(2, [](int i) { if (i == 1) throw std::runtime_error("worker 1 failed"); }),
                       "worker 1 failed", std::runtime_error);
  int sum = 0;
  std::atomic<int> total{0};
  pool.run(2, [&](int i) { total.fetch_add(i + 1); });
  sum = total.load();
  CHECK(sum == 3);
}

TEST_CASE("spin pool: an idle worker goes to sleep after the spin bound, and wakes for the next job") {
  SpinPool pool(1);
  std::atomic<int> runs{0};
  pool.run(2, [&](int) { runs.fetch_add(1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100)); // > kSpinSeconds: the worker sleeps
  CHECK(pool.sleeps() >= 1);
  pool.run(2, [&](int) { runs.fetch_add(1); });
  CHECK(runs.load() == 4);
}

TEST_CASE("parallel_for: every index once, over the threads or on the calling thread") {
  SpinPool pool(1);
  for (bool with_pool : {false, true})
    for (bool parallel : {true, false}) {
      INFO("pool = " << with_pool << ", parallel = " << parallel);
      UsePool use(with_pool ? &pool : nullptr);
      const std::int64_t jobs_before = pool.jobs();
      constexpr std::int64_t n = 1000;
      std::vector<std::atomic<int>> seen(n);
      std::vector<std::thread::id> thread_of(n);
      headgrad::runtime::parallel_for(n, parallel, [&](std::int64_t i) {
        seen[static_cast<std::size_t>(i)].fetch_add(1);
        thread_of[static_cast<std::size_t>(i)] = std::this_thread::get_id();
      });
      for (std::int64_t i = 0; i < n; ++i) REQUIRE(seen[static_cast<std::size_t>(i)].load() == 1);
      CHECK(pool.jobs() - jobs_before == (with_pool && parallel ? 1 : 0)); // the pool took it, or not
      if (!parallel)
        for (const auto& id : thread_of) REQUIRE(id == std::this_thread::get_id());
    }
  int calls = 0;
  headgrad::runtime::parallel_for(0, true, [&](std::int64_t) { ++calls; });
  CHECK(calls == 0);
}

TEST_CASE("run_team: n threads at once on the current pool, else in an OpenMP region, one OpenMP thread each") {
  SpinPool pool(1);
  for (bool with_pool : {true, false}) {
    INFO("pool = " << with_pool);
    UsePool use(with_pool ? &pool : nullptr);
    std::vector<int> ran(2, 0), omp_threads(2, -1);
    std::atomic<int> arrived{0};
    bool together = true;
    headgrad::runtime::run_team(2, [&](int i) {
      ran[static_cast<std::size_t>(i)] = 1;
      omp_threads[static_cast<std::size_t>(i)] = omp_get_max_threads();
      arrived.fetch_add(1);
      const double start = seconds_now(); // both run at once: each sees the other arrive
      while (arrived.load() < 2)
        if (seconds_now() - start > 10) {
          together = false;
          break;
        }
    });
    CHECK(ran == std::vector<int>{1, 1});
    CHECK(omp_threads == std::vector<int>{1, 1});
    CHECK(together);
  }
}

TEST_CASE("run_team: every body runs when OpenMP gives fewer threads (a region inside another)") {
  std::atomic<int> total{0};
  std::atomic<int> inner_team{0};
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    headgrad::runtime::run_team(3, [&](int i) {
      total.fetch_add(1 << i);
      inner_team.store(omp_get_num_threads());
    });
  }
  CHECK(inner_team.load() == 1); // nested: OpenMP gave one thread
  CHECK(total.load() == 1 + 2 + 4);
}

TEST_CASE("spin pool: more bodies than threads is a logic error") {
  SpinPool pool(1);
  CHECK_THROWS_AS(pool.run(3, [](int) {}), std::logic_error);
}

namespace {
// CPU numbers as "0,1" (what a failed check prints).
std::string cpu_list(const std::vector<int>& cpus) {
  std::string s;
  for (int c : cpus) {
    if (!s.empty()) s += ',';
    s += std::to_string(c);
  }
  return s;
}
} // namespace

// Under OMP_PROC_BIND / OMP_PLACES, libgomp binds the initial thread to its first place as the
// program starts, and a std::thread inherits that mask: the pool's workers would all share the
// first place's CPUs. CMakeLists.txt runs this file a second time with OMP_PROC_BIND=close and
// OMP_PLACES=threads; unbound, the workers keep the mask they were started with.
TEST_CASE("spin pool: its workers sit where OpenMP binds the threads of a team of the same size") {
  namespace rt = headgrad::runtime;
  const int n = 2;
  std::vector<std::string> team;
  for (const auto& cpus : rt::openmp_team_cpus(n)) team.push_back(cpu_list(cpus));
  std::vector<std::string> seen(n);
  SpinPool pool(n - 1);
  pool.run(n, [&](int i) {
    // a one-thread OpenMP region first, as the ops' kernels start: libgomp must not move the worker
#pragma omp parallel num_threads(1)
    seen[static_cast<std::size_t>(i)] = cpu_list(rt::this_thread_cpus());
  });
  const std::string caller = cpu_list(rt::this_thread_cpus());
  CHECK(seen[0] == caller);
  if (!rt::openmp_binds_threads()) {
    for (const auto& cpus : team) CHECK(cpus == "");
    CHECK(seen[1] == caller); // a worker inherits its creator's mask
    return;
  }
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    CHECK(seen[static_cast<std::size_t>(i)] == team[static_cast<std::size_t>(i)]);
  }
  // Two CPUs or more in the places: the two threads of the team do not share one (the bug this
  // guards against ran both on the first place's CPU).
  if (rt::available_cores() >= 2 && omp_get_num_places() >= 2) CHECK(seen[1] != seen[0]);
  else MESSAGE("one place: the workers cannot be told apart here");
}

TEST_CASE("available cores: every CPU of OpenMP's places when it binds threads, else the affinity mask") {
  namespace rt = headgrad::runtime;
  // omp_get_num_procs: libgomp's count of the CPUs the program started with, before it bound the
  // initial thread.
  CHECK(rt::available_cores() == omp_get_num_procs());
  if (rt::openmp_binds_threads()) {
    CHECK(rt::openmp_binding().find("places") != std::string::npos);
  } else {
    CHECK(rt::openmp_binding() == "off");
    CHECK(rt::available_cores() == static_cast<int>(rt::this_thread_cpus().size()));
  }
}
