#include "framework/engine/profiler.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <thread>

#include "framework/engine/runtime/clock.hpp"

namespace headgrad {
namespace {

std::thread::id g_profiled_thread; // the thread that enabled the profiler: the one timed
std::map<std::string, OpProfile> g_profile;
WorkersProfile g_workers;
thread_local int t_running = 0;         // timers alive on this thread
thread_local bool t_counting = false;    // the outermost of them counts
thread_local double t_part_seconds = 0;  // time charged to OpParts on this thread, ever

void charge(const char* name, bool backward, double seconds) {
  OpProfile& p = g_profile[name];
  p.name = name;
  if (backward) {
    ++p.backward_calls;
    p.backward_seconds += seconds;
  } else {
    ++p.forward_calls;
    p.forward_seconds += seconds;
  }
}

double now_seconds() { return runtime::seconds_now(); }

} // namespace

void profiler_enable(bool on) {
  detail::profiler_on.store(on, std::memory_order_relaxed);
  g_profiled_thread = std::this_thread::get_id();
}
bool profiler_enabled() { return detail::profiler_on.load(std::memory_order_relaxed); }
void profiler_reset() {
  g_profile.clear();
  g_workers = {};
}

void profiler_add_workers(const std::vector<double>& seconds) {
  if (!profiler_enabled() || std::this_thread::get_id() != g_profiled_thread || seconds.empty()) return;
  if (g_workers.seconds.size() < seconds.size()) g_workers.seconds.resize(seconds.size(), 0.0);
  for (std::size_t i = 0; i < seconds.size(); ++i) g_workers.seconds[i] += seconds[i];
  const auto [lo, hi] = std::minmax_element(seconds.begin(), seconds.end());
  g_workers.slowest_seconds += *hi;
  g_workers.wait_seconds += *hi - *lo;
  ++g_workers.steps;
}

WorkersProfile profiler_workers() { return g_workers; }

std::vector<OpProfile> profiler_report() {
  std::vector<OpProfile> out;
  for (const auto& [name, row] : g_profile) out.push_back(row);
  return out;
}

void OpTimer::enter() {
  entered_ = true;
  counts_ = t_running == 0 && std::this_thread::get_id() == g_profiled_thread;
  start_ = counts_ ? now_seconds() : 0.0;
  parts_at_start_ = t_part_seconds;
  ++t_running;
  if (counts_) t_counting = true;
}

void OpTimer::leave() {
  --t_running;
  if (!counts_) return;
  t_counting = false;
  charge(name_, backward_, now_seconds() - start_ - (t_part_seconds - parts_at_start_));
}

void OpPart::enter() {
  counts_ = t_counting;
  start_ = counts_ ? now_seconds() : 0.0;
}

void OpPart::leave() {
  const double seconds = now_seconds() - start_;
  t_part_seconds += seconds;
  charge(name_, backward_, seconds);
}

} // namespace headgrad
