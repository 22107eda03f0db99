// matmul.cpp - how torch.matmul's (..., M, K) @ (..., K, N) becomes gemm calls, forward and
// backward (the book's loops of the same products are in framework/ops/matmul.cpp).
//
// - Each operand's last two dims are handed to BLAS as they lie in memory: row-major (NoTrans) or
//   column-major, as a transpose view leaves them (Trans), with the leading dimension taken from
//   the strides. An operand BLAS cannot read that way is copied into a contiguous buffer first.
// - Batch dims broadcast: each operand is addressed through batch strides, 0 where it is shared.
// - The fold: when B is shared by every batch element and A's rows are evenly spaced (row-major,
//   contiguous), the whole batch is one gemm of (batch * M) rows.
// - Gradients: dA = s dC op(B)^T and dB = s op(A)^T dC reuse the operands' layouts with the
//   transpose flag flipped (no transposed copy). A gradient buffer is contiguous in its operand's
//   shape; when batch elements share it (a broadcast operand), their gemms sum into it (beta 1).
#include "framework/engine/kernels/matmul.hpp"

#include <algorithm>
#include <vector>

#include "framework/engine/kernels/first_write.hpp"
#include "framework/engine/kernels/gemm_batched.hpp"

namespace headgrad::engine {
namespace {

constexpr int kMax = kernels::kMatmulMaxRank;

// Up to kMax sizes or strides.
struct Sizes {
  int n = 0;
  std::int64_t d[kMax] = {};
  std::int64_t numel() const {
    std::int64_t p = 1;
    for (int i = 0; i < n; ++i) p *= d[i];
    return p;
  }
  bool operator==(const Sizes& o) const { return n == o.n && std::equal(d, d + n, o.d); }
};

Sizes sizes(const std::int64_t* v, int n) {
  Sizes s;
  s.n = n;
  std::copy(v, v + n, s.d);
  return s;
}
Sizes contiguous(const Sizes& shape, std::int64_t inner = 1) {
  Sizes s = shape;
  for (int i = shape.n - 1; i >= 0; --i) {
    s.d[i] = inner;
    inner *= shape.d[i];
  }
  return s;
}
// Strides that read `strides` (of `shape`, aligned to the right) as if it had shape `out`: 0 on
// the axes where shape is 1 or absent (NumPy's broadcasting).
Sizes broadcast(const Sizes& shape, const Sizes& strides, const Sizes& out) {
  Sizes s;
  s.n = out.n;
  for (int i = 0; i < out.n; ++i) {
    const int j = i - (out.n - shape.n);
    s.d[i] = (j < 0 || shape.d[j] == 1) ? 0 : strides.d[j];
  }
  return s;
}

// How BLAS reads one matrix: transposed or not, and its leading dimension.
struct MatrixLayout {
  bool trans = false;
  std::int64_t ld = 0;
};

// How BLAS can read a (rows x cols) matrix with strides (srow, scol); false if it cannot.
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

// One operand as BLAS reads it: its buffer, shape and strides - where BLAS cannot read its own
// layout, a contiguous copy (made only when `read`: a gradient's plan needs the layout alone).
template <typename T> struct Operand {
  const T* data;
  Sizes shape, strides;
  std::vector<T> copy;
  Operand(const T* x, const std::int64_t* shape_, const std::int64_t* strides_, int r, bool read = true)
      : data(x), shape(sizes(shape_, r)), strides(sizes(strides_, r)) {
    MatrixLayout unused;
    if (blas_layout(shape.d[r - 2], shape.d[r - 1], strides.d[r - 2], strides.d[r - 1], unused)) return;
    if (read) {
      copy.resize(static_cast<std::size_t>(shape.numel()));
      std::int64_t idx[kMax] = {}, off = 0; // every element in logical order
      for (std::size_t i = 0; i < copy.size(); ++i) {
        copy[i] = x[off];
        for (int d = r - 1; d >= 0; --d) {
          off += strides.d[d];
          if (++idx[d] < shape.d[d]) break;
          off -= strides.d[d] * shape.d[d];
          idx[d] = 0;
        }
      }
      data = copy.data();
    }
    strides = contiguous(shape);
  }
};

Sizes batch_of(const Sizes& s) {
  Sizes b = s;
  b.n -= 2;
  return b;
}

struct Plan {
  Sizes batch;              // the output's batch dims: A's and B's broadcast together
  std::int64_t M = 0, N = 0, K = 0;
  MatrixLayout a, b;        // how A's and B's matrices are read
  Sizes a_batch, b_batch;   // A's and B's batch strides over `batch` (0: shared by that dim)
  Sizes da_batch, db_batch; // the same for contiguous buffers of A's and B's shapes (gradients)
  std::int64_t a_numel = 0, b_numel = 0;
  bool fold = false;        // one gemm of (batch * M) rows
};

template <typename T> Plan plan(const Operand<T>& A, const Operand<T>& B) {
  const int ra = A.shape.n, rb = B.shape.n;
  Plan p;
  p.M = A.shape.d[ra - 2];
  p.K = A.shape.d[ra - 1];
  p.N = B.shape.d[rb - 1];
  const Sizes ab = batch_of(A.shape), bb = batch_of(B.shape);
  p.batch.n = std::max(ab.n, bb.n);
  for (int i = 0; i < p.batch.n; ++i) { // (the op checked that they broadcast)
    const int ia = i - (p.batch.n - ab.n), ib = i - (p.batch.n - bb.n);
    const std::int64_t x = ia < 0 ? 1 : ab.d[ia], y = ib < 0 ? 1 : bb.d[ib];
    p.batch.d[i] = x == 1 ? y : x;
  }
  blas_layout(p.M, p.K, A.strides.d[ra - 2], A.strides.d[ra - 1], p.a);
  blas_layout(p.K, p.N, B.strides.d[rb - 2], B.strides.d[rb - 1], p.b);
  p.a_batch = broadcast(ab, batch_of(A.strides), p.batch);
  p.b_batch = broadcast(bb, batch_of(B.strides), p.batch);
  p.da_batch = broadcast(ab, batch_of(contiguous(A.shape)), p.batch);
  p.db_batch = broadcast(bb, batch_of(contiguous(B.shape)), p.batch);
  // B is shared when its SHAPE has no batch (every batch dim 1), so the batch is A's: not when
  // its strides are 0, which an expanded B has (one matrix read, but each batch element owns a
  // slice of dB) and so does any tensor with a size-0 dim (strides of an empty shape are 0).
  const bool b_shared = bb.numel() == 1;
  p.a_numel = A.shape.numel();
  p.b_numel = B.shape.numel();
  p.fold = b_shared && !p.a.trans && A.strides == contiguous(A.shape);
  return p;
}

// The gemms of one batched product, as element offsets: (x, y, z) for every batch element, walking
// the batch dims with strides sx, sy, sz (callers map x, y, z to their gemm's A, B and C).
std::vector<BatchOffsets> batch_offsets(const Sizes& batch, const Sizes& sx, const Sizes& sy, const Sizes& sz) {
  std::vector<BatchOffsets> out(static_cast<std::size_t>(batch.numel()));
  std::int64_t idx[kMax] = {};
  BatchOffsets at{0, 0, 0};
  for (BatchOffsets& o : out) {
    o = at;
    for (int d = batch.n - 1; d >= 0; --d) {
      at = {at.a + sx.d[d], at.b + sy.d[d], at.c + sz.d[d]};
      if (++idx[d] < batch.d[d]) break;
      at = {at.a - sx.d[d] * batch.d[d], at.b - sy.d[d] * batch.d[d], at.c - sz.d[d] * batch.d[d]};
      idx[d] = 0;
    }
  }
  return out;
}

// True when no two batch elements share an element of a buffer with these batch strides (a
// broadcast dim has stride 0: its gemms all write the same place).
bool distinct(const Sizes& batch, const Sizes& s) {
  for (int d = 0; d < batch.n; ++d)
    if (batch.d[d] > 1 && s.d[d] == 0) return false;
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

template <typename T>
void batched(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
             const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc, const std::vector<BatchOffsets>& offs,
             bool distinct_outputs) {
  gemm_batched(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, offs.data(),
               static_cast<std::int64_t>(offs.size()), distinct_outputs);
}

} // namespace

template <typename T> void matmul_forward(T* c, const T* a, const T* b, const MatmulShapes& s, T alpha) {
  const Operand<T> A(a, s.a_shape, s.a_strides, s.a_rank), B(b, s.b_shape, s.b_strides, s.b_rank);
  const Plan p = plan(A, B);
  if (p.fold) {
    gemm(false, p.b.trans, p.batch.numel() * p.M, p.N, p.K, alpha, A.data, p.a.ld, B.data, p.b.ld, T(0), c, p.N);
    return;
  }
  // C_i = alpha op(A_i) op(B_i): offsets (A_i, B_i, C_i)
  const auto offs = batch_offsets(p.batch, p.a_batch, p.b_batch, contiguous(p.batch, p.M * p.N));
  batched(p.a.trans, p.b.trans, p.M, p.N, p.K, alpha, A.data, p.a.ld, B.data, p.b.ld, T(0), c, p.N, offs,
          /*distinct_outputs=*/true);
}

template <typename T>
void matmul_backward_a(T* da, bool first_write, const T* dc, const T* b, const MatmulShapes& s, T alpha) {
  const Operand<T> A(nullptr, s.a_shape, s.a_strides, s.a_rank, false), B(b, s.b_shape, s.b_strides, s.b_rank);
  const Plan p = plan(A, B);
  if (p.fold) { // dA (batch*M, K) = alpha dC (batch*M, N) op(B)^T
    const std::int64_t rows = p.batch.numel() * p.M;
    gemm(false, !p.b.trans, rows, p.K, p.N, alpha, dc, p.N, B.data, p.b.ld, first_write_beta<T>(first_write), da, p.K);
    return;
  }
  // dA_i (+)= alpha dC_i op(B_i)^T: offsets (dC_i, B_i, dA_i)
  const bool one = distinct(p.batch, p.da_batch);
  const T beta = beta_for(da, p.a_numel, first_write, one);
  const auto offs = batch_offsets(p.batch, contiguous(p.batch, p.M * p.N), p.b_batch, p.da_batch);
  batched(false, !p.b.trans, p.M, p.K, p.N, alpha, dc, p.N, B.data, p.b.ld, beta, da, p.K, offs, one);
}

template <typename T>
void matmul_backward_b(T* db, bool first_write, const T* a, const T* dc, const MatmulShapes& s, T alpha) {
  const Operand<T> A(a, s.a_shape, s.a_strides, s.a_rank), B(nullptr, s.b_shape, s.b_strides, s.b_rank, false);
  const Plan p = plan(A, B);
  if (p.fold) { // dB (K, N) = alpha op(A)^T (K, batch*M) dC (batch*M, N)
    const std::int64_t rows = p.batch.numel() * p.M;
    gemm(true, false, p.K, p.N, rows, alpha, A.data, p.a.ld, dc, p.N, first_write_beta<T>(first_write), db, p.N);
    return;
  }
  // dB_i (+)= alpha op(A_i)^T dC_i: offsets (A_i, dC_i, dB_i)
  const bool one = distinct(p.batch, p.db_batch);
  const T beta = beta_for(db, p.b_numel, first_write, one);
  const auto offs = batch_offsets(p.batch, p.a_batch, contiguous(p.batch, p.M * p.N), p.db_batch);
  batched(!p.a.trans, false, p.K, p.N, p.M, alpha, A.data, p.a.ld, dc, p.N, beta, db, p.N, offs, one);
}

#define HEADGRAD_MATMUL_INSTANCES(T)                                                                                 \
  template void matmul_forward<T>(T*, const T*, const T*, const MatmulShapes&, T);                                   \
  template void matmul_backward_a<T>(T*, bool, const T*, const T*, const MatmulShapes&, T);                          \
  template void matmul_backward_b<T>(T*, bool, const T*, const T*, const MatmulShapes&, T);
HEADGRAD_MATMUL_INSTANCES(float)
HEADGRAD_MATMUL_INSTANCES(double)
#undef HEADGRAD_MATMUL_INSTANCES

} // namespace headgrad::engine
