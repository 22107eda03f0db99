// layer_norm.cpp - LayerNorm over the last axis, fused: one pass forward, one pass backward
// (the loops are kernels/layer_norm_rows.hpp).
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/layer_norm_rows.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/profiler.hpp"

namespace headgrad::ops {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (x.dim() < 1) throw std::invalid_argument("layer_norm: input must have at least one axis");
  const std::int64_t D = x.shape().back();
  if (D == 0) throw std::invalid_argument(fmt::format("layer_norm: normalising over an empty axis, input {}", x.shape()));
  // Without affine parameters (PyTorch's elementwise_affine=False, or weight/bias None) the kernel
  // gets w = 1 and b = 0: constants that need no gradient, so the backward skips them.
  const Tensor w = weight.defined() ? weight : Tensor::ones({D}, x.dtype());
  const Tensor b = bias.defined() ? bias : Tensor::zeros({D}, x.dtype());
  if (!(w.shape() == Dims{D}) || !(b.shape() == Dims{D}))
    throw std::invalid_argument(fmt::format("layer_norm: weight {} and bias {} must both be [{}] for input {}",
                                            w.shape(), b.shape(), D, x.shape()));
  if (x.dtype() != w.dtype() || x.dtype() != b.dtype())
    throw std::invalid_argument(fmt::format("layer_norm: dtypes differ: input {} {}, weight {} {}", x.shape(),
                                            dtype_name(x.dtype()), w.shape(), dtype_name(w.dtype())));
  OpTimer timer("layer_norm");
  Tensor xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  const std::int64_t rows = x.numel() / D;
  Tensor out = new_tensor(x.shape(), x.dtype());
  Tensor stats = new_tensor({rows, 2}, x.dtype()); // per row: mean, rstd = 1 / sqrt(var + eps)
  dispatch_float(x.dtype(), "layer_norm", [&]<typename T>() {
    kernels::layer_norm_forward<T>(out.data<T>(), stats.data<T>(), xc.data<T>(), wc.data<T>(), bc.data<T>(), rows, D,
                                   static_cast<T>(eps));
  });
  // forward: xhat = (x - mean) rstd;  y = xhat w + b                (per row, over D)
  // local:   dxhat_i/dx_k = rstd (delta_ik - 1/D - xhat_i xhat_k / D)
  // VJP:     g = dy w;  dx += rstd (g - mean(g) - xhat mean(g xhat))
  //          dw += sum_rows dy xhat;  db += sum_rows dy
  // shapes:  x, y, dy, dx: (rows, D); w, b, dw, db: (D); saved stats: (rows, 2) = mean, rstd
  return record(out, "layer_norm", {xc, wc, bc}, [stats, rows, D](Node& n, const Tensor& dy) {
    const Tensor x = n.input(0), w = n.input(1);
    const GradBuffer dx = n.grad_buffer(0), dw = n.grad_buffer(1), db = n.grad_buffer(2);
    dispatch_float(dy.dtype(), "layer_norm", [&]<typename T>() {
      kernels::layer_norm_backward<T>(dx.data<T>(), dx.first_write, dw.data<T>(), dw.first_write, db.data<T>(),
                                      db.first_write, dy.data<T>(), x.data<T>(), w.data<T>(), stats.data<T>(), rows, D);
    });
  });
}

} // namespace headgrad::ops
