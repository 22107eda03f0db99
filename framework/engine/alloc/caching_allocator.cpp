// caching_allocator.cpp - see caching_allocator.hpp: the blocks behind tensors' storage.
#include "framework/engine/alloc/caching_allocator.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <sys/mman.h>
#include <vector>

#include "framework/engine/kernels.hpp"

namespace headgrad {
namespace {

// Sizes are rounded up so that slightly different requests share blocks: to 64 bytes below 4 KiB,
// else to the next of 4 steps per power of two (at most 25% slack).
std::size_t round_size(std::size_t n) {
  if (n == 0) n = 1;
  if (n <= 4096) return (n + 63) & ~std::size_t{63};
  std::size_t p = 4096;
  while (p * 2 < n) p *= 2;
  const std::size_t step = p / 4;
  return (n + step - 1) / step * step;
}

// Blocks of 64 KiB and more (activations, gradients, Adam's moments) are cut from arenas of
// 2 MiB-aligned address space that the kernel is asked to back with transparent huge pages
// (madvise MADV_HUGEPAGE; Linux's Documentation/admin-guide/mm/transhuge.rst). A training step
// walks tens of MiB of such blocks, mostly through OpenBLAS's packing loops, and each 4 KiB page
// of them costs a TLB entry: on the text model's step (bench/README.md) huge pages are about 1.6%
// faster. Each block is cut at a whole number of pages, so it starts on a page and release() can
// drop its pages alone. Where the kernel has no transparent huge pages (or they are "never"),
// madvise fails and the arena is ordinary memory.
constexpr std::size_t kArenaBlockMin = std::size_t{64} << 10;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kArenaBytes = std::size_t{32} << 20;

constexpr std::size_t page_rounded(std::size_t n) { return (n + kPage - 1) / kPage * kPage; }

struct Arena { // (its base address is its key in Cache::arenas)
  std::size_t size;
  std::size_t used = 0; // bytes cut so far, from base up
  std::size_t live = 0; // blocks cut and not handed back by release(): in use, or cached
};

// size bytes of address space at a 2 MiB boundary, advised for huge pages; nullptr if mmap fails.
char* map_arena(std::size_t size) {
  void* p = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  char* const raw = static_cast<char*>(p);
  const std::uintptr_t at = (reinterpret_cast<std::uintptr_t>(raw) + kHugePage - 1) & ~(kHugePage - 1);
  char* const base = raw + (at - reinterpret_cast<std::uintptr_t>(raw));
  if (base > raw) munmap(raw, static_cast<std::size_t>(base - raw)); // the slack on either side
  if (char* const end = base + size; end < raw + size + kHugePage)
    munmap(end, static_cast<std::size_t>(raw + size + kHugePage - end));
#ifdef MADV_HUGEPAGE
  madvise(base, size, MADV_HUGEPAGE); // (advice: an error only means no huge pages)
#endif
  return base;
}

// A number for the calling thread, drawn the first time it allocates.
int thread_tag() {
  static std::atomic<int> next{0};
  thread_local const int tag = next.fetch_add(1, std::memory_order_relaxed);
  return tag;
}

// A cached block and the thread whose tensor held it last: its bytes may still sit in that core's
// cache, dirty. take() hands a thread its own blocks first. Thread replicas build tensors of the
// same sizes at the same moments, and with one newest-first list their blocks changed hands
// every step: a thread then wrote into lines the other core held, and its layer norms, copies and
// gemm packing slowed down 1.5-3x against one thread alone (perf, the toy model's shards at 2
// threads; bench/README.md has the figures).
struct FreeBlock {
  void* p;
  int thread;
  std::uint64_t step; // Cache::step when it was given back (allocator_end_step)
};

struct Cache {
  std::mutex mu;
  std::map<std::size_t, std::vector<FreeBlock>> free_blocks; // by size, newest last
  std::map<char*, Arena> arenas;                        // by base
  std::map<std::size_t, std::vector<char*>> returned;   // arena blocks release() gave back, by size
  std::uint64_t step = 0;                               // allocator_end_step() calls so far
  AllocatorStats stats{};

  void* take(std::size_t cap, int thread) {
    std::lock_guard lock(mu);
    auto it = free_blocks.find(cap);
    if (it != free_blocks.end() && !it->second.empty()) {
      std::vector<FreeBlock>& v = it->second; // the newest of this thread's blocks, else the newest
      const auto own = std::find_if(v.rbegin(), v.rend(), [thread](const FreeBlock& b) { return b.thread == thread; });
      const auto pick = own != v.rend() ? std::prev(own.base()) : std::prev(v.end());
      if (own == v.rend()) ++stats.other_thread_hits;
      void* const p = pick->p;
      v.erase(pick);
      stats.bytes_cached -= cap;
      stats.bytes_in_use += cap;
      ++stats.cache_hits;
      return p;
    }
    void* p = cap >= kArenaBlockMin ? cut(cap) : std::aligned_alloc(64, cap); // 64: a cache line, and AVX-512 friendly
    if (!p) throw std::bad_alloc();
    ++stats.system_allocs;
    stats.bytes_in_use += cap;
    return p;
  }
  void give(void* p, std::size_t cap, int thread) {
    std::lock_guard lock(mu);
    free_blocks[cap].push_back({p, thread, step});
    stats.bytes_in_use -= cap;
    stats.bytes_cached += cap;
  }
  // A new block of cap bytes from an arena: one release() gave back (its pages come back from the
  // system as they are touched), else the unused end of an arena with room, else a new arena.
  char* cut(std::size_t cap) {
    if (auto r = returned.find(cap); r != returned.end() && !r->second.empty()) {
      char* p = r->second.back();
      r->second.pop_back();
      ++arena_at(p)->second.live;
      return p;
    }
    const std::size_t pages = page_rounded(cap);
    auto a = std::find_if(arenas.begin(), arenas.end(),
                          [pages](const auto& e) { return e.second.size - e.second.used >= pages; });
    if (a == arenas.end()) {
      const std::size_t size = std::max(kArenaBytes, (pages + kHugePage - 1) / kHugePage * kHugePage);
      char* const base = map_arena(size);
      if (!base) return nullptr;
      stats.arena_bytes += size;
      a = arenas.emplace(base, Arena{size}).first;
    }
    char* const p = a->first + a->second.used;
    a->second.used += pages;
    ++a->second.live;
    return p;
  }
  // The arena p lies in, or arenas.end() for a block of the system allocator's.
  std::map<char*, Arena>::iterator arena_at(void* p) {
    char* const c = static_cast<char*>(p);
    auto a = arenas.upper_bound(c);
    if (a == arenas.begin()) return arenas.end();
    --a;
    return c < a->first + a->second.size ? a : arenas.end();
  }
  // Every cached block goes back to the system: malloc'd ones are freed; an arena block's pages
  // are dropped (MADV_DONTNEED) and it waits, unmapped from memory, for the next block of its size;
  // an arena whose blocks are all back is unmapped.
  void release() {
    std::lock_guard lock(mu);
    release_if([](const FreeBlock&) { return true; });
  }
  // The end of step `step`: the blocks given back before it began (b.step < step) and not taken
  // since go back to the system; then the next step begins.
  void end_step() {
    std::lock_guard lock(mu);
    const std::uint64_t now = step;
    release_if([now](const FreeBlock& b) { return b.step < now; });
    ++step;
  }
  // The cached blocks for which unused(block) holds go back to the system, as release() says.
  // (mu held)
  template <typename Pred> void release_if(const Pred& unused) {
    bool any = false;
    for (auto& [cap, v] : free_blocks) {
      const std::size_t size = cap;
      std::erase_if(v, [&](const FreeBlock& b) {
        if (!unused(b)) return false;
        any = true;
        stats.bytes_cached -= size;
        const auto a = arena_at(b.p);
        if (a == arenas.end()) {
          std::free(b.p);
          return true;
        }
        madvise(b.p, page_rounded(size), MADV_DONTNEED);
        returned[size].push_back(static_cast<char*>(b.p));
        --a->second.live;
        return true;
      });
    }
    if (!any) return; // (the steady state of a training step: nothing to give back)
    for (auto a = arenas.begin(); a != arenas.end();) {
      if (a->second.live > 0) {
        ++a;
        continue;
      }
      const char *lo = a->first, *hi = lo + a->second.size;
      for (auto& [cap, v] : returned)
        std::erase_if(v, [lo, hi](const char* p) { return p >= lo && p < hi; });
      munmap(a->first, a->second.size);
      stats.arena_bytes -= a->second.size;
      a = arenas.erase(a);
    }
  }
  ~Cache() { release(); }
};

// Under AddressSanitizer every storage gets its own exact-size block and is freed at once: a
// cache would hide overflows into rounding slack and use-after-free of recycled blocks. (GCC
// defines __SANITIZE_ADDRESS__; clang, as in the libFuzzer build, only has the feature test.)
#if defined(__SANITIZE_ADDRESS__)
#define HEADGRAD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEADGRAD_ASAN 1
#endif
#endif
#if defined(HEADGRAD_ASAN)
constexpr bool kUseCache = false;
#else
constexpr bool kUseCache = true;
#endif

Cache& cache() {
  static Cache* c = new Cache(); // leaked on purpose: storages may die during static destruction
  return *c;
}

// A plain block of the system allocator, freed when its storage dies: in reference mode, and under
// AddressSanitizer (exactly the bytes asked for, at least one).
kernels::Block plain_block(std::size_t nbytes) {
  const std::size_t capacity = std::max<std::size_t>(nbytes, 1);
  void* p = std::malloc(capacity);
  if (!p) throw std::bad_alloc();
  return {p, capacity, -1};
}

} // namespace

namespace kernels {

Block allocate(std::size_t nbytes) {
  if (!kUseCache || runtime::reference()) return plain_block(nbytes);
  const std::size_t capacity = round_size(nbytes);
  const int thread = thread_tag();
  return {cache().take(capacity, thread), capacity, thread};
}

void release(const Block& block) {
  if (block.owner < 0) std::free(block.data);
  else cache().give(block.data, block.capacity, block.owner);
}

} // namespace kernels

AllocatorStats allocator_stats() {
  std::lock_guard lock(cache().mu);
  return cache().stats;
}

void allocator_release_cache() {
  if (kUseCache) cache().release();
}

void allocator_end_step() {
  if (kUseCache) cache().end_step();
}

} // namespace headgrad
