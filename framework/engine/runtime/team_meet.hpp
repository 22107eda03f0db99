// team_meet.hpp - the threads of one OpenMP region meet before its end, spinning rather than
// sleeping while they wait for each other.
//
// Why: at the end of a parallel region OpenMP's own barrier puts the threads that arrive first to
// sleep (OMP_WAIT_POLICY=PASSIVE, headgrad's default: startup.hpp), and the last one wakes them.
// On a virtual machine a sleeping virtual CPU is halted, and waking one took about a millisecond
// here (Intel Xeon VM, 2 vCPUs): the text model's step, 23 ms, ended its shard region 1.2 ms after
// both threads had finished their work. Waiting awake for the short time the last thread still
// needs (wait_awake) keeps the CPUs running, and the threads then reach OpenMP's barrier together.
// The wait is bounded (kMaxSpinSeconds): a thread that waits longer than that goes on to OpenMP's
// sleeping barrier, so a region whose threads are badly out of step costs no more CPU than that.
#pragma once
#include <atomic>
#include <thread>

#include "framework/engine/runtime/clock.hpp"

namespace headgrad::runtime {

// One turn of a spin-wait: PAUSE on x86 (yields the core's other hyperthread, saves power),
// nothing elsewhere.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Waits, awake, until ready() or max_seconds have passed; returns ready(). It spins (PAUSE) for
// the first kPauseSeconds, then yields the CPU on every turn: a thread of another program sharing
// the cores runs, and this one, still runnable, does not let its CPU halt. (Two trainings side
// by side on 2 cores ran 25% slower with PAUSE alone, 5% with the yield.)
inline constexpr double kPauseSeconds = 5e-5;
template <typename Ready> bool wait_awake(const Ready& ready, double max_seconds) {
  if (ready()) return true;
  const double start = seconds_now();
  for (int turn = 0;; ++turn) {
    for (int i = 0; i < 32; ++i) spin_pause();
    if (ready()) return true;
    if ((turn & 15) != 15) continue;
    const double waited = seconds_now() - start;
    if (waited > max_seconds) return ready();
    if (waited > kPauseSeconds) std::this_thread::yield();
  }
}

// One meeting of the threads of one parallel region, for one use: each thread of the team calls
// arrive_and_wait() once, as the last thing in the region's body (also on its error path), and
// returns when the whole team (omp_get_num_threads()) has arrived or when it has spun
// kMaxSpinSeconds. Outside a region, or in a team of one, it returns at once.
class TeamMeet {
public:
  static constexpr double kMaxSpinSeconds = 0.005;
  TeamMeet() = default;
  TeamMeet(const TeamMeet&) = delete;
  TeamMeet& operator=(const TeamMeet&) = delete;
  void arrive_and_wait();
  // How many arrivals found the whole team there within kMaxSpinSeconds (the tests read it).
  int met() const { return met_.load(); }

private:
  std::atomic<int> arrived_{0};
  std::atomic<int> met_{0};
};

} // namespace headgrad::runtime
