#include "framework/engine/blas/bf16.hpp"

#include "framework/engine/runtime/cpu_isa.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEADGRAD_BF16_AVX512 1
#endif

namespace headgrad::blas {
namespace {

void to_bf16_scalar(bf16* out, const float* in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = to_bf16(in[i]);
}

#ifdef HEADGRAD_BF16_AVX512
// to_bf16 (bf16.hpp) on 16 floats at a time, step by step the same integer arithmetic, and
// the 16-bit halves packed by VPMOVDW. Built for AVX-512 F/BW/VL whatever the rest of the file is
// built for, and called only when runtime::active_isa() is avx512 (x86-64-v4, which has all three).
// (GCC 12's AVX-512 intrinsics pass an intentionally undefined vector as the unused merge operand,
// which -Wmaybe-uninitialized reports when they are inlined into a target("avx512f") function:
// GCC bug 105593, https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105593. Silenced for these two.)
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define HEADGRAD_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
HEADGRAD_AVX512_TARGET inline __m256i to_bf16_x16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i round_bit = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), round_bit)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_or_epi32(rounded, nan, high, _mm512_set1_epi32(0x0040)));
}

// The rest of a row (< 16) goes through masked loads and stores.
HEADGRAD_AVX512_TARGET void to_bf16_avx512(bf16* out, const float* in, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), to_bf16_x16(_mm512_loadu_ps(in + i)));
  if (i < n) {
    const __mmask16 rest = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(out + i, rest, to_bf16_x16(_mm512_maskz_loadu_ps(rest, in + i)));
  }
}
#undef HEADGRAD_AVX512_TARGET
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

bool use_avx512() {
#ifdef HEADGRAD_BF16_AVX512
  return runtime::active_isa() == runtime::Isa::avx512;
#else
  return false;
#endif
}

} // namespace

void to_bf16(bf16* out, const float* in, std::int64_t n) {
#ifdef HEADGRAD_BF16_AVX512
  if (use_avx512()) return to_bf16_avx512(out, in, n);
#endif
  to_bf16_scalar(out, in, n);
}

void to_bf16(bf16* out, std::int64_t ld_out, const float* in, std::int64_t ld_in, std::int64_t rows,
                 std::int64_t cols) {
  if (rows > 0 && ld_out == cols && ld_in == cols) return to_bf16(out, in, rows * cols); // one run
  const bool wide = use_avx512();
  for (std::int64_t r = 0; r < rows; ++r) {
#ifdef HEADGRAD_BF16_AVX512
    if (wide) {
      to_bf16_avx512(out + r * ld_out, in + r * ld_in, cols);
      continue;
    }
#endif
    to_bf16_scalar(out + r * ld_out, in + r * ld_in, cols);
  }
  (void)wide;
}

void to_float(float* out, const bf16* in, std::int64_t n) {
  // a shift per element: the compiler vectorises this loop at any instruction set
  for (std::int64_t i = 0; i < n; ++i) out[i] = to_float(in[i]);
}

} // namespace headgrad::blas
