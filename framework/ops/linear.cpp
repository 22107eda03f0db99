// linear.cpp - y = x W^T + b as one gemm each way (nn.Linear's F.linear).
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/gemm.hpp"
#include "framework/kernels/row_bias.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/profiler.hpp"

namespace headgrad::ops {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("linear: weight must be (out, in), got {}", weight.shape()));
  const std::int64_t out_f = weight.shape()[0], in_f = weight.shape()[1];
  if (x.dim() < 1 || x.shape().back() != in_f)
    throw std::invalid_argument(fmt::format("linear: input {} does not end in in_features = {} (weight {})", x.shape(),
                                            in_f, weight.shape()));
  if (bias.defined() && !(bias.shape() == Dims{out_f}))
    throw std::invalid_argument(fmt::format("linear: bias {} does not match out_features = {} (weight {})",
                                            bias.shape(), out_f, weight.shape()));
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw std::invalid_argument(fmt::format("linear: dtypes differ: input {} {}, weight {} {}", x.shape(),
                                            dtype_name(x.dtype()), weight.shape(), dtype_name(weight.dtype())));
  OpTimer timer("linear");
  Tensor xc = x.contiguous(), wc = weight.contiguous();
  const std::int64_t rows = Dims(x.shape().begin(), x.shape().end() - 1).numel(); // not numel / in: in may be 0
  Dims oshape = x.shape();
  oshape[oshape.size() - 1] = out_f;
  Tensor out = new_tensor(oshape, x.dtype());
  dispatch_float(x.dtype(), "linear", [&]<typename T>() {
    T* y = out.data<T>();
    if (bias.defined()) kernels::fill_rows<T>(y, bias.contiguous().data<T>(), rows, out_f); // y = b in every row
    // y (+)= x W^T: W (out, in) read with the Trans flag
    kernels::gemm<T>(false, true, rows, out_f, in_f, T(1), xc.data<T>(), in_f, wc.data<T>(), in_f,
                     bias.defined() ? T(1) : T(0), y, out_f);
  });
  // forward: y[r, o] = sum_i x[r, i] W[o, i] + b[o]
  // local:   dy[r,o]/dx[r,i] = W[o,i];  dy[r,o]/dW[o,i] = x[r,i];  dy[r,o]/db[o] = 1
  // VJP:     dx += dy W          (rows, out) @ (out, in)
  //          dW += dy^T x        (out, rows) @ (rows, in): dy read with the Trans flag
  //          db += sum_r dy[r, :]
  // shapes:  x, dx: (..., in) as (rows, in); W, dW: (out, in); b, db: (out); y, dy: (rows, out)
  return record(out, "linear", {xc, wc, bias}, [rows, in_f, out_f](Node& n, const Tensor& dy) {
    const Tensor x = n.input(0), W = n.input(1);
    const GradBuffer dx = n.grad_buffer(0), dW = n.grad_buffer(1), db = n.grad_buffer(2);
    dispatch_float(dy.dtype(), "linear", [&]<typename T>() {
      auto beta = [](const GradBuffer& g) { return g.first_write ? T(0) : T(1); };
      if (dx) kernels::gemm<T>(false, false, rows, in_f, out_f, T(1), dy.data<T>(), out_f, W.data<T>(), in_f, beta(dx),
                               dx.data<T>(), in_f);
      if (dW) kernels::gemm<T>(true, false, out_f, in_f, rows, T(1), dy.data<T>(), out_f, x.data<T>(), in_f, beta(dW),
                               dW.data<T>(), in_f);
      if (db) kernels::column_sums<T>(db.data<T>(), db.first_write, dy.data<T>(), rows, out_f);
    });
  });
}

} // namespace headgrad::ops
