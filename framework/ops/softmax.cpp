// softmax.cpp - softmax and log_softmax over the last axis. The masked forms (valid_lens, causal,
// boolean) are in masked_softmax.cpp and share the same kernels.
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/row_softmax.hpp"
#include "framework/ops/ops.hpp"
#include "framework/profiler.hpp"

namespace headgrad::ops {

Tensor softmax(const Tensor& x) {
  if (x.dim() == 0) throw std::invalid_argument("softmax: needs at least one axis, got a scalar");
  OpTimer timer("softmax");
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  dispatch_float(x.dtype(), "softmax", [&]<typename T>() {
    kernels::softmax_forward<T>(out.data<T>(), xc.data<T>(), nullptr, nullptr, rows, cols);
  });
  // forward: y_i = exp(x_i) / sum_j exp(x_j)       (per row of the last axis)
  // local:   dy_i/dx_k = y_i (delta_ik - y_k)
  // VJP:     dx_k += y_k (dy_k - sum_i dy_i y_i)
  // shapes:  x, y, dy, dx: (rows, cols); softmax keeps its output, not its input
  const Tensor y = out.detach();
  return record(out, "softmax", {x}, [y, rows, cols](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    dispatch_float(dy.dtype(), "softmax", [&]<typename T>() {
      kernels::softmax_backward<T>(dx.data<T>(), dx.first_write, dy.data<T>(), y.data<T>(), rows, cols);
    });
  });
}

Tensor log_softmax(const Tensor& x) {
  if (x.dim() == 0) throw std::invalid_argument("log_softmax: needs at least one axis, got a scalar");
  OpTimer timer("log_softmax");
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  dispatch_float(x.dtype(), "log_softmax", [&]<typename T>() {
    kernels::log_softmax_forward<T>(out.data<T>(), xc.data<T>(), rows, cols);
  });
  // forward: y_i = x_i - log sum_j exp(x_j)
  // local:   dy_i/dx_k = delta_ik - softmax_k
  // VJP:     dx_k += dy_k - exp(y_k) sum_i dy_i
  // shapes:  x, y, dy, dx: (rows, cols)
  const Tensor y = out.detach();
  return record(out, "log_softmax", {x}, [y, rows, cols](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    dispatch_float(dy.dtype(), "log_softmax", [&]<typename T>() {
      kernels::log_softmax_backward<T>(dx.data<T>(), dx.first_write, dy.data<T>(), y.data<T>(), rows, cols);
    });
  });
}

} // namespace headgrad::ops
