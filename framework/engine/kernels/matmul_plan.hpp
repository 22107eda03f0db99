// matmul_plan.hpp - how torch.matmul's (..., M, K) @ (..., K, N) becomes gemm calls, forward and
// backward.
//
// - Each operand's last two dims are handed to BLAS as they lie in memory: row-major (NoTrans) or
//   column-major, as a transpose view leaves them (Trans), with the leading dimension taken from
//   the strides. (An operand BLAS cannot read that way is copied by the op before planning.)
// - Batch dims broadcast: each operand is addressed through batch strides, 0 where it is shared.
// - The fold: when B is shared by every batch element and A's rows are evenly spaced (row-major,
//   contiguous), the whole batch is one gemm of (batch * M) rows.
// - Gradients: dA = s dC op(B)^T and dB = s op(A)^T dC reuse the operands' layouts with the
//   transpose flag flipped (no transposed copy). A gradient buffer is contiguous in its operand's
//   shape; when batch elements share it (a broadcast operand), their gemms sum into it (beta 1).
#pragma once
#include <cstdint>
#include <vector>

#include "framework/core/dims.hpp"

namespace headgrad::kernels {

// How BLAS reads one matrix: transposed or not, and its leading dimension.
struct MatrixLayout {
  bool trans = false;
  std::int64_t ld = 0;
};

// How BLAS can read a (rows x cols) matrix with strides (srow, scol); false if it cannot.
bool blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t srow, std::int64_t scol, MatrixLayout& out);

struct MatmulPlan {
  Dims batch;               // the output's batch dims: A's and B's broadcast together
  std::int64_t M = 0, N = 0, K = 0;
  MatrixLayout a, b;        // how A's and B's matrices are read
  Dims a_batch, b_batch;    // A's and B's batch strides over `batch` (0: shared by that dim)
  Dims da_batch, db_batch;  // the same for contiguous buffers of A's and B's shapes (gradients)
  std::int64_t a_numel = 0, b_numel = 0; // elements of A and of B
  bool fold = false;        // one gemm of (batch * M) rows
};

// Plans A (a_shape, a_strides) @ B (b_shape, b_strides), both at least 2-D, inner dims equal,
// batch dims broadcastable, last two dims readable by BLAS (blas_layout is true for both).
MatmulPlan plan_matmul(const Dims& a_shape, const Dims& a_strides, const Dims& b_shape, const Dims& b_strides);

// C (contiguous, batch x M x N) = alpha op(A) op(B).
template <typename T> void matmul_forward(T* c, const T* a, const T* b, const MatmulPlan& p, T alpha);
// dA (contiguous, A's shape) = or += alpha dC op(B)^T, summed over the batch elements sharing A.
template <typename T>
void matmul_backward_a(T* da, bool first_write, const T* dc, const T* b, const MatmulPlan& p, T alpha);
// dB (contiguous, B's shape) = or += alpha op(A)^T dC, summed over the batch elements sharing B.
template <typename T>
void matmul_backward_b(T* db, bool first_write, const T* a, const T* dc, const MatmulPlan& p, T alpha);

} // namespace headgrad::kernels
