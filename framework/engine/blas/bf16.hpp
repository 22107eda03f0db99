// bf16.hpp - bfloat16 (bf16) numbers and their conversion from and to float32.
//
// A bf16 is the upper half of a float32: 1 sign bit, the same 8 exponent bits (so the same
// range, infinities, NaNs and subnormals) and 7 fraction bits instead of 23, about 3 significant
// decimal digits (Kalamkar et al., "A Study of BFLOAT16 for Deep Learning Training", 2019). A gemm
// with bf16 inputs and float32 accumulation multiplies exactly (the product of two 8-bit
// significands fits in float32's 24) and adds in float32: all of its extra error comes from
// rounding the inputs.
//
// Rounding float32 -> bf16 is to nearest, ties to even, on every path: NaN stays NaN (its sign
// and upper payload kept, the quiet bit set, as Intel's VCVTNEPS2BF16 does), infinities stay
// infinite, a finite number past the largest bf16 rounds to infinity, and subnormals round
// like any other number. (VCVTNEPS2BF16 itself flushes subnormal inputs and outputs to zero, so it
// is not used: every path here gives the same bits as the scalar function below.)
#pragma once
#include <bit>
#include <cstdint>

namespace headgrad::blas {

// The 16 bits of a bf16: a type of its own, so that no integer arithmetic applies to it by
// mistake. Same size and bits as oneDNN's bf16 data type. (Not named bfloat16: OpenBLAS's cblas.h
// declares a global typedef of that name, uint16_t.)
enum class bf16 : std::uint16_t {};

constexpr bf16 to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16(static_cast<std::uint16_t>((u >> 16) | 0x0040u)); // NaN
  // Adding 0x7fff rounds the dropped 16 bits to nearest (a carry into the kept half when they are
  // above one half); adding the kept half's lowest bit too makes an exact half round to even.
  // A carry out of the fraction increments the exponent, which is the right result (up to inf).
  return bf16(static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16));
}

constexpr float to_float(bf16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x) << 16); }

// out[i] = to_bf16(in[i]) for i < n, with AVX-512 when the active instruction set has it
// (runtime::active_isa()), else the scalar loop: the same bits either way.
void to_bf16(bf16* out, const float* in, std::int64_t n);
// A rows x cols block: out[r * ld_out + c] = to_bf16(in[r * ld_in + c]).
void to_bf16(bf16* out, std::int64_t ld_out, const float* in, std::int64_t ld_in, std::int64_t rows,
                 std::int64_t cols);
// out[i] = to_float(in[i]) for i < n (exact).
void to_float(float* out, const bf16* in, std::int64_t n);

} // namespace headgrad::blas
