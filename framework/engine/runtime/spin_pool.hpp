// spin_pool.hpp - the worker threads a training step runs on, kept awake between its phases.
//
// A training step runs three short parallel phases (the shards' forward and backward, the sums of
// their gradients, the optimizer update) with serial work between them and between steps. In
// OpenMP regions under OMP_WAIT_POLICY=PASSIVE (headgrad's default, startup.hpp) the worker thread
// sleeps after each region; on a virtual machine that halts its virtual CPU, and the text model
// trained 8% faster here when the workers spun instead (GOMP_SPINCOUNT=300000, which makes every
// OpenMP thread of the process spin, the BLAS's and other programs' neighbours' included). A
// SpinPool's workers stay awake (wait_awake: PAUSE, then yielding the CPU to whoever else needs
// it) for up to kSpinSeconds after each job, long enough to bridge the
// gaps inside a step and between steps, and then sleep (std::atomic::wait), so an idle pool costs
// nothing. The trainer's ThreadReplicas own one; runtime::parallel_for and run_team (below)
// use the pool the calling thread has made current (UsePool), else OpenMP.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace headgrad::runtime {

class SpinPool {
public:
  static constexpr double kSpinSeconds = 0.005; // awake this long waiting (wait_awake), then asleep
  // `workers` threads besides the caller's (0: run() runs everything on the caller).
  explicit SpinPool(int workers);
  ~SpinPool();
  SpinPool(const SpinPool&) = delete;
  SpinPool& operator=(const SpinPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()) + 1; } // the caller included
  // body(0) on the calling thread and body(1) .. body(n - 1) on workers 1 .. n - 1 (n > size():
  // std::logic_error), each with one OpenMP thread for its own ops; returns when all are done. An
  // exception of a body is rethrown here (the first, by thread index). One caller at a time: the
  // thread that owns the pool.
  void run(int n, const std::function<void(int)>& body);
  // Jobs run so far, and how many times a worker went to sleep waiting for one (the tests read them).
  std::int64_t jobs() const { return jobs_; }
  std::int64_t sleeps() const { return sleeps_.load(); }

private:
  void serve(int index);
  void stop_workers();

  std::vector<std::thread> threads_;
  std::atomic<int> generation_{0}; // a new job, or the stop: +1
  std::atomic<int> remaining_{0};  // workers that have not yet finished (or skipped) the current job
  std::atomic<bool> stop_{false};
  const std::function<void(int)>* body_ = nullptr;
  int n_ = 0;
  std::vector<std::exception_ptr> errors_;
  std::int64_t jobs_ = 0;
  std::atomic<std::int64_t> sleeps_{0};
};

// Makes `pool` (may be null: none) the calling thread's current pool while it lives.
class UsePool {
public:
  explicit UsePool(SpinPool* pool);
  ~UsePool();
  UsePool(const UsePool&) = delete;
  UsePool& operator=(const UsePool&) = delete;

private:
  SpinPool* previous_;
};
SpinPool* current_pool();

// body(i) for i in [0, n), each with one OpenMP thread for its ops: on n threads at once on the
// current pool when it has n threads, else in an OpenMP region of up to n threads that meet
// (TeamMeet) before it ends, a thread running several bodies in turn if OpenMP gives fewer (so
// the bodies must not wait for each other). body must not throw out of an OpenMP region: catch
// inside.
void run_team(int n, const std::function<void(int)>& body);

// body(i) for i in [0, count), each index once, spread over the threads when `parallel` (on the
// current pool's threads if there is one, else OpenMP's, dynamic schedule, meeting before the end)
// and on the calling thread otherwise. body must not throw.
void parallel_for(std::int64_t count, bool parallel, const std::function<void(std::int64_t)>& body);

} // namespace headgrad::runtime
