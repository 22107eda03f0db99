// autocast.cpp - the guard's bf16 copies of the weights, and how a gemm finds them.
#include "framework/engine/autocast.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>

#include "framework/engine/blas/bf16.hpp"
#include "framework/engine/blas/linear_gemm.hpp"

namespace headgrad::runtime {

// The weights of one guard, sorted by address: buffer i is [begin, end) in float32, its bf16
// copy at storage + offset. Read-only once made, so the step's threads read it without a lock.
struct Autocast::Copies {
  struct Entry {
    std::uintptr_t begin, end; // addresses of the float32 buffer
    std::size_t offset;        // of its copy in `storage`
  };
  std::vector<Entry> entries;
  std::vector<blas::bf16> storage;
};

namespace {

std::atomic<std::int64_t> g_weight_buffers{0}, g_weight_elements{0}, g_weight_reads{0}, g_operand_conversions{0},
    g_operand_elements{0};

// The innermost open guard's copies (null: none). A shared_ptr so that a guard's copies outlive
// any gemm that found them; swapped only by guards, between steps.
std::shared_ptr<const Autocast::Copies>& current_copies() {
  static std::shared_ptr<const Autocast::Copies> current;
  return current;
}
std::atomic<const Autocast::Copies*> g_current{nullptr}; // the same, for the gemms' lock-free reads

std::uintptr_t address(const float* p) { return reinterpret_cast<std::uintptr_t>(p); }

std::shared_ptr<const Autocast::Copies> make_copies(const std::vector<WeightBuffer>& weights) {
  auto copies = std::make_shared<Autocast::Copies>();
  std::vector<WeightBuffer> sorted;
  for (const WeightBuffer& w : weights)
    if (w.data && w.count > 0) sorted.push_back(w);
  std::sort(sorted.begin(), sorted.end(),
            [](const WeightBuffer& a, const WeightBuffer& b) { return address(a.data) < address(b.data); });
  std::vector<std::int64_t> sizes;
  std::size_t total = 0;
  for (const WeightBuffer& w : sorted) {
    // the same buffer listed twice (a tied weight under two names) is copied once
    if (!copies->entries.empty() && address(w.data) < copies->entries.back().end) {
      if (address(w.data + w.count) > copies->entries.back().end)
        throw std::invalid_argument("runtime::Autocast: two weight buffers overlap without being the same buffer");
      continue;
    }
    copies->entries.push_back({address(w.data), address(w.data + w.count), total});
    sizes.push_back(w.count);
    total += static_cast<std::size_t>(w.count + 31) / 32 * 32; // each copy starts on a 64-byte line
  }
  copies->storage.resize(total);
  // rounding is elementwise: how the chunks fall over the threads changes no bit
  const Autocast::Copies& c = *copies;
  blas::bf16* out = copies->storage.data();
  kernels::parallel_chunks(sizes, 1, [&](std::size_t j, std::int64_t begin, std::int64_t end) {
    const float* in = reinterpret_cast<const float*>(c.entries[j].begin);
    blas::to_bf16(out + c.entries[j].offset + begin, in + begin, end - begin);
  });
  g_weight_buffers.fetch_add(static_cast<std::int64_t>(sizes.size()), std::memory_order_relaxed);
  std::int64_t elements = 0;
  for (std::int64_t s : sizes) elements += s;
  g_weight_elements.fetch_add(elements, std::memory_order_relaxed);
  return copies;
}

} // namespace

Autocast::Autocast(const std::vector<WeightBuffer>& weights, MatmulPrecision precision) : before_(matmul_precision()) {
  set_matmul_precision(precision); // (refuses bf16 in reference mode and on a CPU without it)
  try {
    if (precision == MatmulPrecision::bf16) mine_ = make_copies(weights);
  } catch (...) {
    detail::matmul_precision_flag().store(before_, std::memory_order_relaxed);
    throw;
  }
  outer_ = current_copies();
  current_copies() = mine_;
  g_current.store(mine_.get(), std::memory_order_release);
}

Autocast::~Autocast() {
  current_copies() = outer_;
  g_current.store(outer_.get(), std::memory_order_release);
  detail::matmul_precision_flag().store(before_, std::memory_order_relaxed); // (was allowed when it was set)
}

AutocastStats autocast_stats() {
  return {g_weight_buffers.load(), g_weight_elements.load(), g_weight_reads.load(), g_operand_conversions.load(),
          g_operand_elements.load()};
}

} // namespace headgrad::runtime

namespace headgrad::engine {

const blas::bf16* autocast_weight(const float* data, std::int64_t extent) {
  const runtime::Autocast::Copies* c = runtime::g_current.load(std::memory_order_acquire);
  if (!c || c->entries.empty()) return nullptr;
  const std::uintptr_t begin = runtime::address(data), end = runtime::address(data + extent);
  // the last buffer starting at or before `data`
  auto it = std::upper_bound(c->entries.begin(), c->entries.end(), begin,
                             [](std::uintptr_t a, const runtime::Autocast::Copies::Entry& e) { return a < e.begin; });
  if (it == c->entries.begin()) return nullptr;
  --it;
  if (end > it->end) return nullptr; // not inside it (an activation elsewhere, or past its end)
  runtime::g_weight_reads.fetch_add(1, std::memory_order_relaxed);
  return c->storage.data() + it->offset + (begin - it->begin) / sizeof(float);
}

void count_operand_conversion(std::int64_t elements) {
  runtime::g_operand_conversions.fetch_add(1, std::memory_order_relaxed);
  runtime::g_operand_elements.fetch_add(elements, std::memory_order_relaxed);
}

} // namespace headgrad::engine
