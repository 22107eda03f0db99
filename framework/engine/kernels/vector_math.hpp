// vector_math.hpp - exp, log, tanh and GELU over whole buffers at the CPU's vector width
// (isa/vector_math_isa.cpp, one copy per instruction set, SLEEF's vector functions inside), split
// over the OpenMP threads when the buffer is big enough.
#pragma once
#include <cstdint>

#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {

using kernels::GeluForm; // (the seam's: kernels.hpp)

HEADGRAD_ISA_BEGIN

// y[i] = exp(x[i]), log(x[i]), tanh(x[i]) for i < n (within 1 ulp: SLEEF's u10 functions).
// y may be x.
template <typename T> void exp_n(T* y, const T* x, std::int64_t n);
template <typename T> void log_n(T* y, const T* x, std::int64_t n);
template <typename T> void tanh_n(T* y, const T* x, std::int64_t n);

// For a (rows, cols) buffer z and an optional per-column bias (null: none): u = z + bias,
// y = gelu(u) (`form` as torch.nn.functional.gelu's approximate) and, when dydu is not null, the
// derivative dydu = gelu'(u), in one pass. y may be z.
template <typename T>
void gelu_rows(T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols, GeluForm form);

HEADGRAD_ISA_END
} // namespace headgrad::engine
