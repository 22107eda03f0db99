#include "framework/engine/runtime/spin_pool.hpp"

#include <fmt/format.h>
#include <omp.h>
#include <stdexcept>

#include "framework/engine/runtime/team_meet.hpp"
#include "framework/engine/runtime/threads.hpp"

namespace headgrad::runtime {
namespace {

thread_local SpinPool* t_pool = nullptr;

// The calling thread's OpenMP thread count set to 1 while it lives (its ops run alone).
struct OneOmpThread {
  int before = omp_get_max_threads();
  OneOmpThread() { omp_set_num_threads(1); }
  ~OneOmpThread() { omp_set_num_threads(before); }
};

} // namespace

SpinPool::SpinPool(int workers) : errors_(static_cast<std::size_t>(workers > 0 ? workers + 1 : 1)) {
  // Under OMP_PROC_BIND / OMP_PLACES worker i runs where OpenMP would put thread i of the team.
  // Started as it is, it would inherit the caller's mask, the first place alone (threads.hpp), and
  // every worker would share that place's CPUs: with one CPU per place the step ran at half speed.
  // Binding it once is not enough: libgomp binds a thread that is not one of its own to the first
  // place again whenever that thread starts an OpenMP region (the kernels' one-thread regions
  // included), but not inside a region of the thread's own - so the worker serves inside one.
  const std::vector<std::vector<int>> cpus = openmp_team_cpus(workers + 1);
  try {
    for (int i = 1; i <= workers; ++i)
      threads_.emplace_back([this, i, where = cpus[static_cast<std::size_t>(i)]] {
        if (where.empty()) return serve(i); // OpenMP binds nothing
#pragma omp parallel num_threads(1)
        {
          bind_this_thread(where); // (if refused, it runs where it was started)
          serve(i);
        }
      });
  } catch (...) { // a thread could not be started: the ones that were stop before the error goes on
    stop_workers();
    throw;
  }
}

SpinPool::~SpinPool() { stop_workers(); }

void SpinPool::stop_workers() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void SpinPool::serve(int index) {
  omp_set_num_threads(1); // this thread's ops run alone, as a worker of an OpenMP region's would
  int seen = 0; // the generation at construction, not a load here: a job may come before this thread runs
  for (;;) {
    if (!wait_awake([&] { return generation_.load(std::memory_order_acquire) != seen; }, kSpinSeconds)) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      generation_.wait(seen, std::memory_order_acquire);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    if (index < n_) { // (a worker outside the job acknowledges it too: run() returns once all have seen it)
      try {
        (*body_)(index);
      } catch (...) {
        errors_[static_cast<std::size_t>(index)] = std::current_exception();
      }
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
  }
}

void SpinPool::run(int n, const std::function<void(int)>& body) {
  if (n > size())
    throw std::logic_error(fmt::format("SpinPool::run: {} bodies for a pool of {} threads", n, size()));
  ++jobs_;
  OneOmpThread one;
  if (n <= 1) {
    UsePool none(nullptr);
    if (n == 1) body(0);
    return;
  }
  for (auto& e : errors_) e = nullptr;
  UsePool none(nullptr); // a parallel_for or run_team inside body(0) runs on this thread alone
  body_ = &body;
  n_ = n;
  remaining_.store(size() - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel); // publishes body_, n_ and remaining_
  generation_.notify_all();
  try {
    body(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  if (!wait_awake([&] { return remaining_.load(std::memory_order_acquire) == 0; }, kSpinSeconds))
    for (int r = remaining_.load(std::memory_order_acquire); r != 0; r = remaining_.load(std::memory_order_acquire))
      remaining_.wait(r, std::memory_order_acquire);
  for (const auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

UsePool::UsePool(SpinPool* pool) : previous_(t_pool) { t_pool = pool; }
UsePool::~UsePool() { t_pool = previous_; }
SpinPool* current_pool() { return t_pool; }

void run_team(int n, const std::function<void(int)>& body) {
  if (SpinPool* pool = t_pool; pool && pool->size() >= n) return pool->run(n, body);
  TeamMeet meet;
#pragma omp parallel num_threads(n)
  {
    omp_set_num_threads(1); // this thread's ops run alone (a region of one thread would not say so)
    // OpenMP may give fewer than n threads (OMP_THREAD_LIMIT, OMP_DYNAMIC, a region inside another):
    // then a thread runs several bodies, one after the other
    for (int i = omp_get_thread_num(); i < n; i += omp_get_num_threads()) body(i);
    meet.arrive_and_wait();
  }
}

void parallel_for(std::int64_t count, bool parallel, const std::function<void(std::int64_t)>& body) {
  if (SpinPool* pool = t_pool; parallel && pool && pool->size() > 1 && count > 1) {
    std::atomic<std::int64_t> next{0};
    pool->run(pool->size(), [&](int) {
      for (std::int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) body(i);
    });
    return;
  }
  TeamMeet meet;
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(dynamic) nowait
    for (std::int64_t i = 0; i < count; ++i) body(i);
    meet.arrive_and_wait();
  }
}

} // namespace headgrad::runtime
