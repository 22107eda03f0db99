// matmul.cpp - torch.matmul semantics on top of BLAS gemm.
//
// Each operand's last two dims are handed to BLAS as they lie in memory: row-major (NoTrans) or
// column-major, as a transpose view leaves them (Trans), with the leading dimension taken from
// the strides. Only a layout BLAS cannot describe is copied. Batch dims broadcast, and the batch
// loop walks batch strides: no per-batch allocation.
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/gemm.hpp"
#include "framework/kernels/gemm_batched.hpp"
#include "framework/ops/broadcast.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {
namespace {

struct Layout {
  bool trans;
  std::int64_t ld;
};

// How BLAS can read a (rows x cols) matrix with these strides, if at all.
bool blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t srow, std::int64_t scol, Layout& out) {
  // Row-major (NoTrans): element (i, j) at i*ld + j. A size-1 dim's stride does not matter.
  if (cols == 1 || scol == 1) {
    const std::int64_t ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : srow;
    if (ld >= std::max<std::int64_t>(cols, 1)) { out = {false, ld}; return true; }
  }
  // Column-major (Trans), as a transpose view leaves it: element (i, j) at j*ld + i.
  if (rows == 1 || srow == 1) {
    const std::int64_t ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : scol;
    if (ld >= std::max<std::int64_t>(rows, 1)) { out = {true, ld}; return true; }
  }
  return false;
}

// A batched operand: matrix layout plus per-batch-dim strides broadcast to the output batch.
struct Operand {
  Tensor t; // possibly made contiguous
  Layout lay;
  Dims batch_strides;
};

Operand prepare(const Tensor& x, const Dims& out_batch) {
  Tensor t = x;
  const int r = t.dim();
  Layout lay{};
  if (!blas_layout(t.shape()[r - 2], t.shape()[r - 1], t.strides()[r - 2], t.strides()[r - 1], lay)) {
    t = t.contiguous();
    lay = {false, t.shape()[r - 1]};
  }
  Dims bshape(t.shape().begin(), t.shape().end() - 2);
  Dims bstr(t.strides().begin(), t.strides().end() - 2);
  return {t, lay, broadcast_strides(bshape, bstr, out_batch)};
}

// Calls f(batch_offset_a, batch_offset_b, batch_index) for every output batch element.
template <typename F> void for_each_batch(const Dims& batch, const Dims& sa, const Dims& sb, F&& f) {
  const std::int64_t count = batch.numel();
  std::int64_t idx[kMaxDims] = {};
  std::int64_t oa = 0, ob = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    f(oa, ob, i);
    for (int d = batch.size() - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) { oa += sa[d]; ob += sb[d]; break; }
      oa -= sa[d] * (batch[d] - 1);
      ob -= sb[d] * (batch[d] - 1);
      idx[d] = 0;
    }
  }
}

// The batch elements as triples (offset in the first strided operand, offset in the second, batch
// index i); callers turn them into the (A, B, C) offsets of their gemm.
std::vector<kernels::BatchOffsets> batch_offsets(const Dims& batch, const Dims& sa, const Dims& sb) {
  std::vector<kernels::BatchOffsets> out;
  out.reserve(static_cast<std::size_t>(batch.numel()));
  for_each_batch(batch, sa, sb, [&](std::int64_t oa, std::int64_t ob, std::int64_t i) { out.push_back({oa, ob, i}); });
  return out;
}

// True when no two batch elements share an element of an operand laid out with these batch
// strides (a broadcast dimension has stride 0: its gradient gemms accumulate into one place).
bool strides_distinct(const Dims& batch, const Dims& s) {
  for (int d = 0; d < batch.size(); ++d)
    if (batch[d] > 1 && s[d] == 0) return false;
  return true;
}

bool batch_is_zero(const Dims& s) {
  for (auto v : s) if (v != 0) return false;
  return true;
}

Tensor matmul_nd(const Tensor& a, const Tensor& b, double scale) {
  const int ra = a.dim(), rb = b.dim();
  const std::int64_t M = a.shape()[ra - 2], K = a.shape()[ra - 1], N = b.shape()[rb - 1];
  if (b.shape()[rb - 2] != K)
    throw std::invalid_argument(fmt::format("matmul: inner dimensions differ: {} @ {}", a.shape(), b.shape()));
  Dims batch;
  try {
    batch = broadcast_shapes(Dims(a.shape().begin(), a.shape().end() - 2), Dims(b.shape().begin(), b.shape().end() - 2),
                             "matmul");
  } catch (const std::invalid_argument&) { // name the operands, not only their batch dims
    throw std::invalid_argument(fmt::format("matmul: batch dimensions cannot be broadcast: {} @ {}", a.shape(), b.shape()));
  }
  ForwardTimer timer("matmul");
  Operand A = prepare(a, batch), B = prepare(b, batch);
  Dims oshape = batch;
  oshape.push_back(M);
  oshape.push_back(N);
  Tensor out = new_tensor(oshape, a.dtype());
  // Fold: B shared by every batch and A's rows evenly spaced -> one gemm of (batch*M) rows.
  const bool fold = batch_is_zero(B.batch_strides) && !A.lay.trans && A.t.is_contiguous();
  dispatch_float(a.dtype(), "matmul", [&]<typename T>() {
    const T* pa = A.t.template data<T>();
    const T* pb = B.t.template data<T>();
    T* pc = out.data<T>();
    const T alpha = static_cast<T>(scale);
    if (fold) {
      kernels::gemm(false, B.lay.trans, batch.numel() * M, N, K, alpha, pa, A.lay.ld, pb, B.lay.ld, T(0), pc, N);
      return;
    }
    std::vector<kernels::BatchOffsets> offs = batch_offsets(batch, A.batch_strides, B.batch_strides);
    for (auto& o : offs) o.c *= M * N; // (A_i, B_i, i) -> C_i
    kernels::gemm_batched(A.lay.trans, B.lay.trans, M, N, K, alpha, pa, A.lay.ld, pb, B.lay.ld, T(0), pc, N, offs,
                          /*distinct_outputs=*/true);
  });
  // forward:  C = s op(A) op(B)                    per batch element; op = as stored (N or T);
  //           s = scale, gemm's alpha (attention's 1/sqrt(d) costs no extra pass)
  // local:    dC_ij/dA_ik = s B_kj ; dC_ij/dB_kj = s A_ik
  // VJP:      dA += s dC op(B)^T  (B read with its flag flipped: no transposed copy)
  //           dB += s op(A)^T dC
  // shapes:   A (..., M, K), B (..., K, N), C/dC (batch, M, N); dA, dB contiguous in A's and
  //           B's shapes, addressed through broadcast batch strides (0 where an operand was
  //           broadcast, so gemm's beta = 1 sums over those batch elements).
  return record(out, "matmul", {A.t, B.t}, [A, B, batch, M, N, K, fold, scale](Node& n, const Tensor& gC) {
    // A fresh gradient buffer is written by its gemms with beta = 0 (no zero fill) when every
    // element of it has exactly one gemm; a broadcast operand's gemms sum into it, from zeros.
    bool fresh_a = false, fresh_b = false;
    Tensor gA = n.grad_for_write(0, fresh_a), gB = n.grad_for_write(1, fresh_b);
    dispatch_float(gC.dtype(), "matmul", [&]<typename T>() {
      const T* pa = A.t.template data<T>();
      const T* pb = B.t.template data<T>();
      const T* pg = gC.data<T>();
      const T alpha = static_cast<T>(scale);
      if (fold) {
        const std::int64_t rows = batch.numel() * M;
        if (gA.defined())
          kernels::gemm(false, !B.lay.trans, rows, K, N, alpha, pg, N, pb, B.lay.ld, fresh_a ? T(0) : T(1), gA.data<T>(), K);
        if (gB.defined())
          kernels::gemm(true, false, K, N, rows, alpha, pa, A.lay.ld, pg, N, fresh_b ? T(0) : T(1), gB.data<T>(), N);
        return;
      }
      const Dims gsa = gA.defined() ? broadcast_strides(Dims(gA.shape().begin(), gA.shape().end() - 2),
                                                        Dims(gA.strides().begin(), gA.strides().end() - 2), batch)
                                    : Dims();
      const Dims gsb = gB.defined() ? broadcast_strides(Dims(gB.shape().begin(), gB.shape().end() - 2),
                                                        Dims(gB.strides().begin(), gB.strides().end() - 2), batch)
                                    : Dims();
      // dA_i += dC_i op(B_i)^T: offsets (dC_i, B_i, dA_i)
      if (gA.defined()) {
        std::vector<kernels::BatchOffsets> offs = batch_offsets(batch, gsa, B.batch_strides);
        for (auto& o : offs) o = {o.c * M * N, o.b, o.a}; // from (dA_i, B_i, i)
        const bool distinct = strides_distinct(batch, gsa);
        if (fresh_a && !distinct) std::fill(gA.data<T>(), gA.data<T>() + gA.numel(), T(0));
        kernels::gemm_batched(false, !B.lay.trans, M, K, N, alpha, pg, N, pb, B.lay.ld, fresh_a && distinct ? T(0) : T(1),
                              gA.data<T>(), K, offs, distinct);
      }
      // dB_i += op(A_i)^T dC_i: offsets (A_i, dC_i, dB_i)
      if (gB.defined()) {
        std::vector<kernels::BatchOffsets> offs = batch_offsets(batch, A.batch_strides, gsb);
        for (auto& o : offs) o = {o.a, o.c * M * N, o.b}; // from (A_i, dB_i, i)
        const bool distinct = strides_distinct(batch, gsb);
        if (fresh_b && !distinct) std::fill(gB.data<T>(), gB.data<T>() + gB.numel(), T(0));
        kernels::gemm_batched(!A.lay.trans, false, K, N, M, alpha, pa, A.lay.ld, pg, N, fresh_b && distinct ? T(0) : T(1),
                              gB.data<T>(), N, offs, distinct);
      }
    });
  });
}

} // namespace

Tensor matmul(const Tensor& a, const Tensor& b, double scale) {
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
