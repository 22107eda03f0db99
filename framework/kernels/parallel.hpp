// parallel.hpp - when an elementwise loop is worth the OpenMP threads.
#pragma once
#include <cstdint>

namespace headgrad::kernels {

// Elementwise loops split over threads from this many elements on (1 MiB of floats). Waking a
// sleeping OpenMP thread (OMP_WAIT_POLICY=PASSIVE) costs tens of microseconds, a pass over
// 2^18 floats about as much: smaller tensors (the default model's 1024 x 64 activations) stay on
// one thread, the large bench config's 2048 x 1024 FFN activations and 128 x 128 x 128 scores
// split.
inline constexpr std::int64_t kParallelElements = std::int64_t{1} << 18;

} // namespace headgrad::kernels
