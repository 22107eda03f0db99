// row_softmax_f32.cpp - the float softmax row kernel, cloned per instruction set (see
// row_softmax.hpp).
#include "framework/kernels/row_softmax.hpp"

namespace headgrad::kernels {

// GCC on x86-64 builds an AVX2 and a baseline copy and an ifunc that picks one at load time;
// numerics are the same in both (no FMA contraction under -std=c++20, fixed reduction order).
// Not under the sanitizers, whose instrumentation and load-time ifunc resolution do not mix.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx2", "default"), flatten)) // flatten: inline the row code into each clone
#endif
void softmax_row_f32(float* yr, const float* xr, std::int64_t len, const std::uint8_t* kr, std::int64_t cols) {
  softmax_row<float>(yr, xr, len, kr, cols);
}

} // namespace headgrad::kernels
