// matmul.hpp - torch.matmul's (..., M, K) @ (..., K, N) as gemm calls, forward and backward (the
// seam's matmul_forward, matmul_backward_a, matmul_backward_b; matmul.cpp says how).
#pragma once
#include "framework/engine/kernels.hpp"

namespace headgrad::engine {

using kernels::MatmulShapes;

// C (contiguous, batch x M x N) = alpha op(A) op(B).
template <typename T> void matmul_forward(T* c, const T* a, const T* b, const MatmulShapes& s, T alpha);
// dA (contiguous, A's shape) = or += alpha dC op(B)^T, summed over the batch elements sharing A.
template <typename T>
void matmul_backward_a(T* da, bool first_write, const T* dc, const T* b, const MatmulShapes& s, T alpha);
// dB (contiguous, B's shape) = or += alpha op(A)^T dC, summed over the batch elements sharing B.
template <typename T>
void matmul_backward_b(T* db, bool first_write, const T* a, const T* dc, const MatmulShapes& s, T alpha);

} // namespace headgrad::engine
