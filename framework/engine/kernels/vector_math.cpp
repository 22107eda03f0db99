#include "framework/engine/kernels/vector_math.hpp"

#include <algorithm>

#include "framework/engine/kernels/parallel.hpp"

namespace headgrad::kernels {
namespace {

// Threads take blocks of this many elements (a multiple of every vector width).
constexpr std::int64_t kBlock = 4096;

// fn(y + i, x + i, len) over [0, n) in blocks, over the threads when worth it (`cost` simple
// operations per element: an exp is ~8).
template <typename T, typename Fn> void blocks(T* y, const T* x, std::int64_t n, std::int64_t cost, Fn fn) {
  const std::int64_t count = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(n, cost))
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t i = b * kBlock;
    fn(y + i, x + i, std::min(kBlock, n - i));
  }
}

} // namespace

template <typename T> void exp_n(T* y, const T* x, std::int64_t n) { blocks(y, x, n, 8, kernel_table().math<T>().exp); }
template <typename T> void log_n(T* y, const T* x, std::int64_t n) { blocks(y, x, n, 8, kernel_table().math<T>().log); }
template <typename T> void tanh_n(T* y, const T* x, std::int64_t n) {
  blocks(y, x, n, 8, kernel_table().math<T>().tanh);
}

template <typename T>
void gelu_rows(T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols, GeluForm form) {
  const auto fn = kernel_table().math<T>().gelu[static_cast<int>(form)];
  constexpr std::int64_t kCost = 16; // an exp or tanh and a division
  if (!bias) { // one flat buffer: blocks of elements
    const std::int64_t n = rows * cols, count = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(n, kCost))
    for (std::int64_t b = 0; b < count; ++b) {
      const std::int64_t i = b * kBlock;
      fn(y + i, dydu ? dydu + i : nullptr, z + i, nullptr, 1, std::min(kBlock, n - i));
    }
    return;
  }
  // blocks of whole rows (the bias repeats per row)
  const std::int64_t per = std::max<std::int64_t>(1, kBlock / std::max<std::int64_t>(cols, 1));
  const std::int64_t count = (rows + per - 1) / per;
#pragma omp parallel for schedule(static) if (count > 1 && worth_threads(rows * cols, kCost))
  for (std::int64_t b = 0; b < count; ++b) {
    const std::int64_t r = b * per, o = r * cols;
    fn(y + o, dydu ? dydu + o : nullptr, z + o, bias, std::min(per, rows - r), cols);
  }
}

#define HEADGRAD_VECTOR_MATH(T)                                                                                     \
  template void exp_n<T>(T*, const T*, std::int64_t);                                                               \
  template void log_n<T>(T*, const T*, std::int64_t);                                                               \
  template void tanh_n<T>(T*, const T*, std::int64_t);                                                              \
  template void gelu_rows<T>(T*, T*, const T*, const T*, std::int64_t, std::int64_t, GeluForm);
HEADGRAD_VECTOR_MATH(float)
HEADGRAD_VECTOR_MATH(double)
#undef HEADGRAD_VECTOR_MATH

} // namespace headgrad::kernels
