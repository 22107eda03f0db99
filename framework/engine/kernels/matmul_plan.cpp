#include "framework/engine/kernels/matmul_plan.hpp"

#include <algorithm>
#include <array>

#include "framework/core/broadcast.hpp"
#include "framework/engine/kernels/first_write.hpp"
#include "framework/engine/kernels/gemm_batched.hpp"
#include "framework/engine/kernels/strided.hpp"

namespace headgrad::kernels {
namespace {

Dims batch_of(const Dims& d) { return Dims(d.begin(), d.end() - 2); }

Dims times(Dims d, std::int64_t k) {
  for (auto& v : d) v *= k;
  return d;
}

// The gemms of one batched product, as element offsets: (x, y, z) for every batch element, walking
// the batch dims with strides sx, sy, sz (callers map x, y, z to their gemm's A, B and C).
std::vector<BatchOffsets> batch_offsets(const Dims& batch, const Dims& sx, const Dims& sy, const Dims& sz) {
  std::vector<BatchOffsets> out;
  out.reserve(static_cast<std::size_t>(batch.numel()));
  for_each_row<3>(batch, std::array<Dims, 3>{sx, sy, sz}, [&](const auto& o, std::int64_t n, const auto& in) {
    for (std::int64_t i = 0; i < n; ++i) out.push_back({o[0] + i * in[0], o[1] + i * in[1], o[2] + i * in[2]});
  });
  return out;
}

// True when no two batch elements share an element of a buffer with these batch strides (a
// broadcast dim has stride 0: its gemms all write the same place).
bool distinct(const Dims& batch, const Dims& s) {
  for (int d = 0; d < batch.size(); ++d)
    if (batch[d] > 1 && s[d] == 0) return false;
  return true;
}

// A gradient written by gemms over the batch: a first write can assign (beta 0) only when every
// element has exactly one gemm; otherwise the buffer is zeroed and the gemms add into it.
template <typename T> T beta_for(T* buf, std::int64_t numel, bool first_write, bool one_gemm_per_element) {
  if (!first_write) return T(1);
  if (one_gemm_per_element) return T(0);
  std::fill(buf, buf + numel, T(0));
  return T(1);
}

} // namespace

bool blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t srow, std::int64_t scol, MatrixLayout& out) {
  // Row-major (NoTrans): element (i, j) at i*ld + j. A size-1 dim's stride does not matter.
  if (cols == 1 || scol == 1) {
    const std::int64_t ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : srow;
    if (ld >= std::max<std::int64_t>(cols, 1)) {
      out = {false, ld};
      return true;
    }
  }
  // Column-major (Trans), as a transpose view leaves it: element (i, j) at j*ld + i.
  if (rows == 1 || srow == 1) {
    const std::int64_t ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : scol;
    if (ld >= std::max<std::int64_t>(rows, 1)) {
      out = {true, ld};
      return true;
    }
  }
  return false;
}

MatmulPlan plan_matmul(const Dims& a_shape, const Dims& a_strides, const Dims& b_shape, const Dims& b_strides) {
  const int ra = a_shape.size(), rb = b_shape.size();
  MatmulPlan p;
  p.M = a_shape[ra - 2];
  p.K = a_shape[ra - 1];
  p.N = b_shape[rb - 1];
  p.batch = broadcast_shapes(batch_of(a_shape), batch_of(b_shape), "matmul");
  blas_layout(p.M, p.K, a_strides[ra - 2], a_strides[ra - 1], p.a);
  blas_layout(p.K, p.N, b_strides[rb - 2], b_strides[rb - 1], p.b);
  p.a_batch = broadcast_strides(batch_of(a_shape), batch_of(a_strides), p.batch);
  p.b_batch = broadcast_strides(batch_of(b_shape), batch_of(b_strides), p.batch);
  p.da_batch = broadcast_strides(batch_of(a_shape), batch_of(contiguous_strides(a_shape)), p.batch);
  p.db_batch = broadcast_strides(batch_of(b_shape), batch_of(contiguous_strides(b_shape)), p.batch);
  // B is shared when its SHAPE has no batch (every batch dim 1), so the batch is A's: not when
  // its strides are 0, which an expanded B has (one matrix read, but each batch element owns a
  // slice of dB) and so does any tensor with a size-0 dim (strides of an empty shape are 0).
  const bool b_shared = batch_of(b_shape).numel() == 1;
  p.a_numel = a_shape.numel();
  p.b_numel = b_shape.numel();
  p.fold = b_shared && !p.a.trans && a_strides == contiguous_strides(a_shape);
  return p;
}

template <typename T> void matmul_forward(T* c, const T* a, const T* b, const MatmulPlan& p, T alpha) {
  if (p.fold) {
    gemm(false, p.b.trans, p.batch.numel() * p.M, p.N, p.K, alpha, a, p.a.ld, b, p.b.ld, T(0), c, p.N);
    return;
  }
  // C_i = alpha op(A_i) op(B_i): offsets (A_i, B_i, C_i)
  const auto offs = batch_offsets(p.batch, p.a_batch, p.b_batch, times(contiguous_strides(p.batch), p.M * p.N));
  gemm_batched(p.a.trans, p.b.trans, p.M, p.N, p.K, alpha, a, p.a.ld, b, p.b.ld, T(0), c, p.N, offs,
               /*distinct_outputs=*/true);
}

template <typename T>
void matmul_backward_a(T* da, bool first_write, const T* dc, const T* b, const MatmulPlan& p, T alpha) {
  if (p.fold) { // dA (batch*M, K) = alpha dC (batch*M, N) op(B)^T
    const std::int64_t rows = p.batch.numel() * p.M;
    gemm(false, !p.b.trans, rows, p.K, p.N, alpha, dc, p.N, b, p.b.ld, first_write_beta<T>(first_write), da, p.K);
    return;
  }
  // dA_i (+)= alpha dC_i op(B_i)^T: offsets (dC_i, B_i, dA_i)
  const bool one = distinct(p.batch, p.da_batch);
  const T beta = beta_for(da, p.a_numel, first_write, one);
  const auto offs = batch_offsets(p.batch, times(contiguous_strides(p.batch), p.M * p.N), p.b_batch, p.da_batch);
  gemm_batched(false, !p.b.trans, p.M, p.K, p.N, alpha, dc, p.N, b, p.b.ld, beta, da, p.K, offs, one);
}

template <typename T>
void matmul_backward_b(T* db, bool first_write, const T* a, const T* dc, const MatmulPlan& p, T alpha) {
  if (p.fold) { // dB (K, N) = alpha op(A)^T (K, batch*M) dC (batch*M, N)
    const std::int64_t rows = p.batch.numel() * p.M;
    gemm(true, false, p.K, p.N, rows, alpha, a, p.a.ld, dc, p.N, first_write_beta<T>(first_write), db, p.N);
    return;
  }
  // dB_i (+)= alpha op(A_i)^T dC_i: offsets (A_i, dC_i, dB_i)
  const bool one = distinct(p.batch, p.db_batch);
  const T beta = beta_for(db, p.b_numel, first_write, one);
  const auto offs = batch_offsets(p.batch, p.a_batch, times(contiguous_strides(p.batch), p.M * p.N), p.db_batch);
  gemm_batched(!p.a.trans, false, p.K, p.N, p.M, alpha, a, p.a.ld, dc, p.N, beta, db, p.N, offs, one);
}

template void matmul_forward<float>(float*, const float*, const float*, const MatmulPlan&, float);
template void matmul_forward<double>(double*, const double*, const double*, const MatmulPlan&, double);
template void matmul_backward_a<float>(float*, bool, const float*, const float*, const MatmulPlan&, float);
template void matmul_backward_a<double>(double*, bool, const double*, const double*, const MatmulPlan&, double);
template void matmul_backward_b<float>(float*, bool, const float*, const float*, const MatmulPlan&, float);
template void matmul_backward_b<double>(double*, bool, const double*, const double*, const MatmulPlan&, double);

} // namespace headgrad::kernels
