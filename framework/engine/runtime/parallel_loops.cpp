// parallel_loops.cpp - the threads the book's loops run on (the seam's parallel_for,
// parallel_tasks and parallel_chunks, framework/engine/kernels.hpp).
#include <algorithm>
#include <omp.h>

#include "framework/engine/kernels.hpp"
#include "framework/engine/runtime/spin_pool.hpp"

namespace headgrad::kernels {

void run_slices(std::int64_t n, void (*slice)(const void* body, std::int64_t begin, std::int64_t end),
                const void* body) {
  // contiguous slices, one per thread, as OpenMP's schedule(static) cuts a loop
#pragma omp parallel
  {
    const std::int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    const std::int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    if (begin < end) slice(body, begin, end);
  }
}

void parallel_tasks(std::int64_t count, std::int64_t work, std::int64_t cost,
                    const std::function<void(std::int64_t)>& task) {
  const bool parallel = count > 1 && work * cost >= kParallelWork && !runtime::reference();
  runtime::parallel_for(count, parallel, task);
}

// Measured on the text model's 810,240 parameters in 27 tensors, 2 threads: AdamW's step 1.27 ->
// 1.20 ms as one parallel region of chunks instead of one region per parameter (waking sleeping
// threads costs tens of microseconds each time; it moves 28 bytes per parameter: ~19 GB/s, the
// memory's pace), the gradient clipping 0.30 -> 0.19 ms; and the parameters too small to split no
// longer run on one thread while the others wait.
void parallel_chunks(const std::vector<std::int64_t>& sizes, std::int64_t cost,
                     const std::function<void(std::size_t, std::int64_t, std::int64_t)>& update) {
  constexpr std::int64_t kChunk = 8192;
  struct Chunk {
    std::size_t job;
    std::int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  std::int64_t total = 0;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    for (std::int64_t b = 0; b < sizes[j]; b += kChunk) chunks.push_back({j, b, std::min(sizes[j], b + kChunk)});
    total += sizes[j];
  }
  parallel_tasks(static_cast<std::int64_t>(chunks.size()), total, cost, [&](std::int64_t i) {
    const Chunk& c = chunks[static_cast<std::size_t>(i)];
    update(c.job, c.begin, c.end);
  });
}

} // namespace headgrad::kernels
