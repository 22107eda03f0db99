// matmul.cpp - torch.matmul semantics on top of BLAS gemm. How the product maps onto gemm calls
// (transpose flags instead of copies, broadcast batch strides, the fold into one big gemm) is
// kernels/matmul_plan.hpp; this file is the op: checks, the forward, and its backward.
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/engine/kernels/matmul_plan.hpp"
#include "framework/ops/ops.hpp"
#include "framework/engine/profiler.hpp"

namespace headgrad::ops {
namespace {

// x itself if BLAS can read its last two dims as they lie in memory, else a contiguous copy.
Tensor blas_readable(const Tensor& x) {
  const int r = x.dim();
  kernels::MatrixLayout unused;
  const bool ok = kernels::blas_layout(x.shape()[r - 2], x.shape()[r - 1], x.strides()[r - 2], x.strides()[r - 1], unused);
  return ok ? x : x.contiguous();
}

Tensor matmul_nd(const Tensor& a, const Tensor& b, double scale) {
  try {
    broadcast_shapes(Dims(a.shape().begin(), a.shape().end() - 2), Dims(b.shape().begin(), b.shape().end() - 2),
                     "matmul");
  } catch (const std::invalid_argument&) { // name the operands, not only their batch dims
    throw std::invalid_argument(fmt::format("matmul: batch dimensions cannot be broadcast: {} @ {}", a.shape(), b.shape()));
  }
  OpTimer timer("matmul");
  const Tensor A = blas_readable(a), B = blas_readable(b);
  const kernels::MatmulPlan plan = kernels::plan_matmul(A.shape(), A.strides(), B.shape(), B.strides());
  Dims oshape = plan.batch;
  oshape.push_back(plan.M);
  oshape.push_back(plan.N);
  Tensor out = new_tensor(oshape, a.dtype());
  dispatch_float(a.dtype(), "matmul", [&]<typename T>() {
    kernels::matmul_forward<T>(out.data<T>(), A.data<T>(), B.data<T>(), plan, static_cast<T>(scale));
  });
  // forward: C = s op(A) op(B)            per batch element; op = as stored (N or T), s = scale
  //                                        (the gemm's alpha: attention's 1/sqrt(d) costs no pass)
  // local:   dC_ij/dA_ik = s B_kj;  dC_ij/dB_kj = s A_ik
  // VJP:     dA += s dC op(B)^T;  dB += s op(A)^T dC   (summed over batch elements that share A or B)
  // shapes:  A (..., M, K), B (..., K, N), C and dC (batch, M, N); dA, dB: A's and B's shapes
  return record(out, "matmul", {A, B}, [plan, scale](Node& n, const Tensor& dC) {
    const Tensor A = n.input(0), B = n.input(1);
    const GradBuffer dA = n.grad_buffer(0), dB = n.grad_buffer(1);
    dispatch_float(dC.dtype(), "matmul", [&]<typename T>() {
      const T s = static_cast<T>(scale);
      if (dA) kernels::matmul_backward_a<T>(dA.data<T>(), dA.first_write, dC.data<T>(), B.data<T>(), plan, s);
      if (dB) kernels::matmul_backward_b<T>(dB.data<T>(), dB.first_write, A.data<T>(), dC.data<T>(), plan, s);
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
