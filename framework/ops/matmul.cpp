// matmul.cpp - torch.matmul semantics: the op (checks, the forward, its backward), the book's loop
// of gemm, and the book's loops of the batched products the op runs. (The engine runs each as
// gemm calls that read transposed operands through flags instead of copies and fold a shared B
// into one gemm: framework/engine/kernels/matmul.cpp.)
#include <algorithm>
#include <array>
#include <fmt/format.h>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/core/strided.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::book {

namespace {

// Z (m x n, row stride ldz) += alpha X Y, X (m x k) and Y (k x n) read through (row, column)
// strides: the triple loop of every product below.
template <typename T> struct View {
  const T* at;
  std::int64_t row, col;
};
template <typename T>
void add_product(T* z, std::int64_t ldz, View<T> x, View<T> y, std::int64_t m, std::int64_t n, std::int64_t k,
                 T alpha) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      T sum = 0;
      for (std::int64_t t = 0; t < k; ++t) sum += x.at[i * x.row + t * x.col] * y.at[t * y.row + j * y.col];
      z[i * ldz + j] += alpha * sum;
    }
}

} // namespace

// C = alpha op(A) op(B) + beta C, row-major: op(A) (m x k) is A, or A stored transposed (ta), with
// leading dimension lda; op(B) (k x n) likewise. beta 0: C is not read (it may be uninitialised).
template <typename T>
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  add_product<T>(c, ldc, {a, ta ? 1 : lda, ta ? lda : 1}, {b, tb ? 1 : ldb, tb ? ldb : 1}, m, n, k, alpha);
}
HEADGRAD_BOOK_LOOP(gemm);

namespace {

// A (..., M, K) @ B (..., K, N) matrix by matrix: A's element (i, t) of batch element e at
// a[at[e][0] + i * a_row + t * a_col], B's (t, j) at b[at[e][1] + t * b_row + j * b_col], and C's,
// dA's and dB's (contiguous) at at[e][2], at[e][3], at[e][4] plus i N + j, i K + t, t N + j.
struct Batches {
  std::int64_t M, K, N, a_row, a_col, b_row, b_col;
  std::vector<std::array<std::int64_t, 5>> at;
};
Batches batches(const MatmulShapes& s) {
  const Dims as(s.a_shape, s.a_shape + s.a_rank), ast(s.a_strides, s.a_strides + s.a_rank);
  const Dims bs(s.b_shape, s.b_shape + s.b_rank), bst(s.b_strides, s.b_strides + s.b_rank);
  const int ra = s.a_rank, rb = s.b_rank;
  Batches r{as[ra - 2], as[ra - 1], bs[rb - 1], ast[ra - 2], ast[ra - 1], bst[rb - 2], bst[rb - 1], {}};
  const Dims ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const Dims batch = broadcast_shapes(ab, bb, "matmul");
  Dims c = contiguous_strides(batch), da = contiguous_strides(ab), db = contiguous_strides(bb);
  for (auto& v : c) v *= r.M * r.N;
  for (auto& v : da) v *= r.M * r.K;
  for (auto& v : db) v *= r.K * r.N;
  const std::array<Dims, 5> st{broadcast_strides(ab, Dims(ast.begin(), ast.end() - 2), batch),
                               broadcast_strides(bb, Dims(bst.begin(), bst.end() - 2), batch), c,
                               broadcast_strides(ab, da, batch), broadcast_strides(bb, db, batch)};
  for_each_row<5>(batch, st, [&](const auto& o, std::int64_t n, const auto& in) {
    for (std::int64_t e = 0; e < n; ++e)
      r.at.push_back({o[0] + e * in[0], o[1] + e * in[1], o[2] + e * in[2], o[3] + e * in[3], o[4] + e * in[4]});
  });
  return r;
}

} // namespace

// forward:  C_e = alpha A_e B_e for every batch element e (A's and B's batch dims broadcast)
template <typename T> void matmul_forward(T* c, const T* a, const T* b, const MatmulShapes& s, T alpha) {
  const Batches p = batches(s);
  std::fill(c, c + static_cast<std::int64_t>(p.at.size()) * p.M * p.N, T(0));
  for (const auto& e : p.at)
    add_product<T>(c + e[2], p.N, {a + e[0], p.a_row, p.a_col}, {b + e[1], p.b_row, p.b_col}, p.M, p.N, p.K, alpha);
}
HEADGRAD_BOOK_LOOP(matmul_forward);

// VJP:      dA_e = or += alpha dC_e B_e^T, summed over the batch elements that share A (first_write: =)
template <typename T>
void matmul_backward_a(T* da, bool first_write, const T* dc, const T* b, const MatmulShapes& s, T alpha) {
  const Batches p = batches(s);
  if (first_write) std::fill(da, da + Dims(s.a_shape, s.a_shape + s.a_rank).numel(), T(0));
  for (const auto& e : p.at)
    add_product<T>(da + e[3], p.K, {dc + e[2], p.N, 1}, {b + e[1], p.b_col, p.b_row}, p.M, p.K, p.N, alpha);
}
HEADGRAD_BOOK_LOOP(matmul_backward_a);

// VJP:      dB_e = or += alpha A_e^T dC_e, summed over the batch elements that share B
template <typename T>
void matmul_backward_b(T* db, bool first_write, const T* a, const T* dc, const MatmulShapes& s, T alpha) {
  const Batches p = batches(s);
  if (first_write) std::fill(db, db + Dims(s.b_shape, s.b_shape + s.b_rank).numel(), T(0));
  for (const auto& e : p.at)
    add_product<T>(db + e[4], p.N, {a + e[0], p.a_col, p.a_row}, {dc + e[2], p.N, 1}, p.K, p.N, p.M, alpha);
}
HEADGRAD_BOOK_LOOP(matmul_backward_b);

} // namespace headgrad::book

namespace headgrad::ops {
namespace {

// a @ b's operands as the kernels take them.
kernels::MatmulShapes shapes_of(const Tensor& a, const Tensor& b) {
  static_assert(kMaxDims <= kernels::kMatmulMaxRank);
  kernels::MatmulShapes s;
  s.a_rank = a.dim();
  s.b_rank = b.dim();
  std::copy(a.shape().begin(), a.shape().end(), s.a_shape);
  std::copy(a.strides().begin(), a.strides().end(), s.a_strides);
  std::copy(b.shape().begin(), b.shape().end(), s.b_shape);
  std::copy(b.strides().begin(), b.strides().end(), s.b_strides);
  return s;
}

Tensor matmul_nd(const Tensor& a, const Tensor& b, double scale) {
  try {
    broadcast_shapes(Dims(a.shape().begin(), a.shape().end() - 2), Dims(b.shape().begin(), b.shape().end() - 2),
                     "matmul");
  } catch (const std::invalid_argument&) { // name the operands, not only their batch dims
    throw std::invalid_argument(fmt::format("matmul: batch dimensions cannot be broadcast: {} @ {}", a.shape(), b.shape()));
  }
  OpTimer timer("matmul");
  const kernels::MatmulShapes shapes = shapes_of(a, b);
  Dims oshape = broadcast_shapes(Dims(a.shape().begin(), a.shape().end() - 2),
                                 Dims(b.shape().begin(), b.shape().end() - 2), "matmul");
  oshape.push_back(a.shape()[a.dim() - 2]);
  oshape.push_back(b.shape().back());
  Tensor out = new_tensor(oshape, a.dtype());
  dispatch_float(a.dtype(), "matmul", [&]<typename T>() {
    kernels::matmul_forward<T>(out.data<T>(), a.data<T>(), b.data<T>(), shapes, static_cast<T>(scale));
  });
  // forward: C = s op(A) op(B)            per batch element; op = as stored (N or T), s = scale
  //                                        (the gemm's alpha: attention's 1/sqrt(d) costs no pass)
  // local:   dC_ij/dA_ik = s B_kj;  dC_ij/dB_kj = s A_ik
  // VJP:     dA += s dC op(B)^T;  dB += s op(A)^T dC   (summed over batch elements that share A or B)
  // shapes:  A (..., M, K), B (..., K, N), C and dC (batch, M, N); dA, dB: A's and B's shapes
  return record(out, "matmul", {a, b}, [shapes, scale](Node& n, const Tensor& dC) {
    const Tensor A = n.input(0), B = n.input(1);
    const GradBuffer dA = n.grad_buffer(0), dB = n.grad_buffer(1);
    dispatch_float(dC.dtype(), "matmul", [&]<typename T>() {
      const T s = static_cast<T>(scale);
      if (dA) kernels::matmul_backward_a<T>(dA.data<T>(), dA.first_write, dC.data<T>(), B.data<T>(), shapes, s);
      if (dB) kernels::matmul_backward_b<T>(dB.data<T>(), dB.first_write, A.data<T>(), dC.data<T>(), shapes, s);
    });
  });
}

} // namespace

Tensor matmul(const Tensor& a, const Tensor& b, double scale) {
  check_defined(a, "matmul", "a");
  check_defined(b, "matmul", "b");
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(fmt::format("matmul: dtypes differ: {} {} @ {} {}", a.shape(), dtype_name(a.dtype()),
                                            b.shape(), dtype_name(b.dtype())));
  if (a.dim() == 0 || b.dim() == 0)
    throw std::invalid_argument(fmt::format("matmul: both operands need at least one dim: {} @ {}", a.shape(), b.shape()));
  // Checked here, before 1-D operands are promoted, so the message shows the shapes as given.
  if (a.shape().back() != (b.dim() == 1 ? b.shape()[0] : b.shape()[b.dim() - 2]))
    throw std::invalid_argument(fmt::format("matmul: inner dimensions differ: {} @ {}", a.shape(), b.shape()));
  // 1-D operands are promoted (a: (K) -> (1, K); b: (K) -> (K, 1)) and the added dim removed.
  const bool va = a.dim() == 1, vb = b.dim() == 1;
  Tensor a2 = va ? reshape(a, {1, a.shape()[0]}) : a;
  Tensor b2 = vb ? reshape(b, {b.shape()[0], 1}) : b;
  Tensor c = matmul_nd(a2, b2, scale);
  if (!va && !vb) return c;
  Dims s(c.shape().begin(), c.shape().end() - 2);
  if (!va) s.push_back(c.shape()[c.dim() - 2]);
  if (!vb) s.push_back(c.shape()[c.dim() - 1]);
  return reshape(c, s);
}

} // namespace headgrad::ops
