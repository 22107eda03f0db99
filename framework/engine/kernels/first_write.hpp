// first_write.hpp - writing a gradient into a buffer that may hold nothing yet.
//
// The first backward to write an input's gradient gets a buffer that is not zeroed
// (GradBuffer::first_write, framework/core/autograd.hpp): it stores (=) where a later one adds (+=),
// which saves the pass that would fill the buffer with zeros first. These two helpers are that
// choice, once: per element, and as the beta of a gemm writing C (beta 0 ignores what C holds,
// NaN included; beta 1 adds to it).
#pragma once

#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {
HEADGRAD_ISA_BEGIN

// dst = v on the first write, dst += v after it.
template <typename T> inline void store_grad(T& dst, T v, bool first_write) { dst = first_write ? v : dst + v; }

// C = alpha op(A) op(B) on the first write, C += alpha op(A) op(B) after it.
template <typename T> constexpr T first_write_beta(bool first_write) { return first_write ? T(0) : T(1); }

HEADGRAD_ISA_END
} // namespace headgrad::engine
