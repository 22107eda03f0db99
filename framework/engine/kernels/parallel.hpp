// parallel.hpp - the one rule for when a loop is worth the OpenMP threads. (Gemms have their own,
// in gemm_threads.cpp: there the work is m n k multiply-adds, not elements.)
#pragma once
#include <cstdint>

#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// A loop is split over the threads once its work reaches kernels::kParallelWork simple operations
// (the seam's rule, which the book's parallel_for follows too): the default model's 1024 x 64
// activations stay on one thread, the large bench config's 2048 x 1024 FFN activations split.
// `elements` items costing about `cost` simple operations each: 1 for an add or a copy, 4 for a
// layer-norm or Adam element, 8 for a softmax element (its exp).
inline bool worth_threads(std::int64_t elements, std::int64_t cost = 1) {
  return elements * cost >= kernels::kParallelWork;
}

// Threads that are awake already - a runtime::SpinPool's, spinning between a training step's
// phases - take a loop for a few microseconds, so far less work is worth them: 2^14 operations
// (the toy model's 68k gradient elements, added and squared, split over 2 threads: 0.15 -> 0.08 ms).
inline constexpr std::int64_t kAwakeParallelWork = std::int64_t{1} << 14;
inline bool worth_awake_threads(std::int64_t elements, std::int64_t cost = 1) {
  return elements * cost >= kAwakeParallelWork;
}

HEADGRAD_ISA_END
} // namespace headgrad::engine
