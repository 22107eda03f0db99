#include "framework/storage.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

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

struct Cache {
  std::mutex mu;
  std::map<std::size_t, std::vector<void*>> free_blocks;
  AllocatorStats stats{};

  void* take(std::size_t cap) {
    {
      std::lock_guard lock(mu);
      auto it = free_blocks.find(cap);
      if (it != free_blocks.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        stats.bytes_cached -= cap;
        stats.bytes_in_use += cap;
        ++stats.cache_hits;
        return p;
      }
      ++stats.system_allocs;
      stats.bytes_in_use += cap;
    }
    void* p = std::aligned_alloc(64, cap); // 64: a cache line, and AVX-512 friendly
    if (!p) throw std::bad_alloc();
    return p;
  }
  void give(void* p, std::size_t cap) {
    std::lock_guard lock(mu);
    free_blocks[cap].push_back(p);
    stats.bytes_in_use -= cap;
    stats.bytes_cached += cap;
  }
  void release() {
    std::lock_guard lock(mu);
    for (auto& [cap, v] : free_blocks)
      for (void* p : v) std::free(p);
    free_blocks.clear();
    stats.bytes_cached = 0;
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

} // namespace

Storage::Storage(std::size_t nbytes)
    : data_(nullptr), nbytes_(nbytes), capacity_(kUseCache ? round_size(nbytes) : std::max<std::size_t>(nbytes, 1)) {
  if (kUseCache) {
    data_ = cache().take(capacity_);
  } else {
    data_ = std::malloc(capacity_);
    if (!data_) throw std::bad_alloc();
  }
}

Storage::~Storage() {
  if (kUseCache) cache().give(data_, capacity_);
  else std::free(data_);
}

AllocatorStats allocator_stats() {
  std::lock_guard lock(cache().mu);
  return cache().stats;
}

void allocator_release_cache() { cache().release(); }

} // namespace headgrad
