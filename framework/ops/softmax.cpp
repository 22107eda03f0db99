// softmax.cpp - softmax and log_softmax over the last axis. The masked forms (valid_lens, causal,
// boolean) are in masked_softmax.cpp and share the same kernels.
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/softmax.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {

Tensor softmax(const Tensor& x) {
  if (x.dim() == 0) throw std::invalid_argument("softmax: needs at least one axis, got a scalar");
  ForwardTimer timer("softmax");
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  dispatch_float(x.dtype(), "softmax", [&]<typename T>() {
    kernels::softmax_forward<T>(out.data<T>(), xc.data<T>(), nullptr, nullptr, rows, cols);
  });
  Tensor y = out.detach(); // softmax keeps its output, not its input
  return record(out, "softmax", {x}, [y, rows, cols](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    dispatch_float(gx.dtype(), "softmax", [&]<typename T>() {
      kernels::softmax_backward<T>(gx.data<T>(), gy.data<T>(), y.data<T>(), rows, cols);
    });
  });
}

Tensor log_softmax(const Tensor& x) {
  if (x.dim() == 0) throw std::invalid_argument("log_softmax: needs at least one axis, got a scalar");
  ForwardTimer timer("log_softmax");
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  dispatch_float(x.dtype(), "log_softmax", [&]<typename T>() {
    kernels::log_softmax_forward<T>(out.data<T>(), xc.data<T>(), rows, cols);
  });
  Tensor y = out.detach();
  return record(out, "log_softmax", {x}, [y, rows, cols](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    dispatch_float(gx.dtype(), "log_softmax", [&]<typename T>() {
      kernels::log_softmax_backward<T>(gx.data<T>(), gy.data<T>(), y.data<T>(), rows, cols);
    });
  });
}

} // namespace headgrad::ops
