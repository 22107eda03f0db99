// test_storage.cpp - the caching allocator (framework/engine/alloc/): blocks of 64 KiB and more are
// cut from 2 MiB-aligned arenas advised for transparent huge pages, a page apart; release() gives
// their memory back, and unmaps an arena once all its blocks are back; a thread is given back the
// blocks it used before another thread's.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "framework/ops/ops.hpp"
#include "framework/core/storage.hpp"
#include "framework/engine/alloc/caching_allocator.hpp"
#include "framework/core/tensor.hpp"

using namespace headgrad;

namespace {

// Under AddressSanitizer there is no cache (caching_allocator.cpp): every block is freed at once.
bool cache_on() {
  allocator_release_cache();
  { Storage s(1 << 20); }
  const bool on = allocator_stats().bytes_cached > 0;
  allocator_release_cache();
  return on;
}

// The VmFlags line of the mapping /proc/self/smaps lists for address p ("" if none does).
std::string vm_flags_at(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= a && a < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool thp_configured() { // "[never]" in the setting: madvise is refused, the arena is plain memory
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return !s.empty() && s.find("[never]") == std::string::npos;
}

} // namespace

TEST_CASE("storage: large blocks come from a huge-page arena, each on its own pages") {
  if (!cache_on()) return;
  const std::size_t arenas_before = allocator_stats().arena_bytes;
  Storage a(300 << 10), b(300 << 10), small(1000);
  CHECK(allocator_stats().arena_bytes >= arenas_before + (32u << 20)); // one 32 MiB arena, or more
  for (const Storage* s : {&a, &b})
    CHECK(reinterpret_cast<std::uintptr_t>(s->data()) % 4096 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % 64 == 0);
  const auto gap = reinterpret_cast<char*>(b.data()) - reinterpret_cast<char*>(a.data());
  CHECK((gap >= static_cast<std::ptrdiff_t>(300 << 10) || gap <= -static_cast<std::ptrdiff_t>(300 << 10)));
  if (thp_configured()) CHECK(vm_flags_at(a.data()).find(" hg") != std::string::npos); // MADV_HUGEPAGE
  // The blocks hold what is written to them, as any memory.
  auto* pa = static_cast<std::uint8_t*>(a.data());
  auto* pb = static_cast<std::uint8_t*>(b.data());
  for (std::size_t i = 0; i < (300u << 10); ++i) {
    pa[i] = static_cast<std::uint8_t>(i);
    pb[i] = static_cast<std::uint8_t>(~i);
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < (300u << 10); ++i)
    bad += pa[i] != static_cast<std::uint8_t>(i) || pb[i] != static_cast<std::uint8_t>(~i);
  CHECK(bad == 0);
}

TEST_CASE("storage: release gives an arena block's memory back; a block of its size takes its place again") {
  if (!cache_on()) return;
  void* first = nullptr;
  {
    Storage s(1 << 20);
    first = s.data();
    static_cast<char*>(s.data())[0] = 7;
  }
  CHECK(allocator_stats().bytes_cached >= (1u << 20));
  const AllocatorStats before = allocator_stats();
  allocator_release_cache();
  CHECK(allocator_stats().bytes_cached == 0);
  Storage again(1 << 20); // no longer cached: a system allocation, at the returned block's address
  CHECK(allocator_stats().system_allocs == before.system_allocs + 1);
  CHECK(allocator_stats().cache_hits == before.cache_hits);
  CHECK(again.data() == first);
  static_cast<char*>(again.data())[(1 << 20) - 1] = 1; // the memory is there to be written
}

TEST_CASE("storage: an arena whose blocks are all back is unmapped") {
  if (!cache_on()) return;
  const std::size_t before = allocator_stats().arena_bytes;
  { Storage big(std::size_t{40} << 20); } // larger than an arena: its own, of whole 2 MiB pages
  CHECK(allocator_stats().arena_bytes >= before + (std::size_t{40} << 20));
  CHECK(allocator_stats().arena_bytes % (std::size_t{2} << 20) == 0);
  allocator_release_cache();
  CHECK(allocator_stats().arena_bytes == before);
}

TEST_CASE("storage: tensors of arena blocks compute as any other") {
  const Tensor x = Tensor::full({256, 256}, 1.5); // 256 KiB: an arena block
  const std::vector<double> y = ops::add(x, x).to_vector();
  std::size_t wrong = 0;
  for (const double v : y) wrong += v != 3.0;
  CHECK(y.size() == 256u * 256u);
  CHECK(wrong == 0);
}

TEST_CASE("storage: a thread gets its own freed block back before another thread's newer one") {
  if (!cache_on()) return;
  constexpr std::size_t kBytes = 200 << 10;
  std::optional<Storage> a(std::in_place, kBytes), b;
  std::thread([&] { b.emplace(kBytes); }).join(); // a block another thread drew
  void *const mine = a->data(), *const theirs = b->data();
  REQUIRE(mine != theirs);
  a.reset();
  b.reset(); // the newest in the cache
  const AllocatorStats before = allocator_stats();
  {
    Storage again(kBytes); // newest first would give `theirs`
    CHECK(again.data() == mine);
    CHECK(allocator_stats().other_thread_hits == before.other_thread_hits);
  }
  void* taken = nullptr;
  std::thread([&] { // a thread with no block of its own takes the newest: this thread's, just freed
    Storage s(kBytes);
    taken = s.data();
  }).join();
  CHECK(taken == mine);
  CHECK(allocator_stats().other_thread_hits == before.other_thread_hits + 1);
  CHECK(allocator_stats().system_allocs == before.system_allocs);
  allocator_release_cache();
}

// Fault 16: allocator_end_step gives back what the step now ending did not reuse, and nothing it
// did; AllocatorPhase gives back the cache when a phase of other shapes begins and ends.
TEST_CASE("storage: fault 16: the end of a step returns the blocks the step did not reuse, and only those") {
  if (!cache_on()) return;
  allocator_end_step(); // a step boundary before the blocks below
  { Storage used(1 << 20), idle(3 << 20); } // one "step" frees both
  allocator_end_step();
  CHECK(allocator_stats().bytes_cached >= (4u << 20));
  for (int step = 0; step < 3; ++step) { // the steps reuse the 1 MiB block only
    { Storage again(1 << 20); }
    allocator_end_step();
    // the 3 MiB block went back at the end of the first step that did not take it
    CHECK(allocator_stats().bytes_cached == (1u << 20));
  }
  const AllocatorStats steady = allocator_stats();
  { Storage again(1 << 20); }
  allocator_end_step();
  CHECK(allocator_stats().cache_hits == steady.cache_hits + 1); // the reused block stayed cached
  CHECK(allocator_stats().system_allocs == steady.system_allocs);
  {
    const AllocatorPhase phase; // an evaluation: starts with nothing cached, leaves nothing cached
    CHECK(allocator_stats().bytes_cached == 0);
    { Storage chunk(5 << 20); }
    CHECK(allocator_stats().bytes_cached >= (5u << 20));
  }
  CHECK(allocator_stats().bytes_cached == 0);
}
