// linear.cpp - y = x W^T + b as one gemm each way (nn.Linear's F.linear).
#include <algorithm>
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/gemm.hpp"
#include "framework/kernels/parallel.hpp"
#include "framework/ops/nn_ops.hpp"

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
  ForwardTimer timer("linear");
  Tensor xc = x.contiguous(), wc = weight.contiguous();
  const std::int64_t rows = in_f == 0 ? 0 : x.numel() / in_f;
  Dims oshape = x.shape();
  oshape[oshape.size() - 1] = out_f;
  Tensor out = new_tensor(oshape, x.dtype());
  dispatch_float(x.dtype(), "linear", [&]<typename T>() {
    T* y = out.data<T>();
    T beta = 0;
    if (bias.defined()) { // y starts as the bias in every row; gemm then adds x W^T (beta = 1)
      Tensor bc = bias.contiguous();
      const T* b = bc.data<T>();
#pragma omp parallel for schedule(static) if (rows * out_f >= kernels::kParallelElements)
      for (std::int64_t r = 0; r < rows; ++r) std::copy(b, b + out_f, y + r * out_f);
      beta = 1;
    }
    kernels::gemm(false, true, rows, out_f, in_f, T(1), xc.data<T>(), in_f, wc.data<T>(), in_f, beta, y, out_f);
  });
  // forward:  y[r, o] = sum_i x[r, i] W[o, i] + b[o]
  // local:    dy[r,o]/dx[r,i] = W[o,i];  dy[r,o]/dW[o,i] = x[r,i];  dy[r,o]/db[o] = 1
  // VJP:      dx += dy W          (rows, out) @ (out, in)
  //           dW += dy^T x        (out, rows) @ (rows, in)  - dy read with the Trans flag
  //           db += sum_r dy[r, :]
  // shapes:   x, dx: (..., in) as (rows, in); W, dW: (out, in); b, db: (out); y, dy: (rows, out)
  return record(out, "linear", {xc, wc, bias}, [rows, in_f, out_f](Node& n, const Tensor& gy) {
    bool fresh_x = false; // a fresh dx is written by the gemm with beta = 0: no zero fill
    Tensor gx = n.grad_for_write(0, fresh_x), gw = n.grad(1), gb = n.grad(2);
    Tensor xv = n.input(0), wv = n.input(1);
    dispatch_float(gy.dtype(), "linear", [&]<typename T>() {
      const T* g = gy.data<T>();
      if (gx.defined())
        kernels::gemm(false, false, rows, in_f, out_f, T(1), g, out_f, wv.data<T>(), in_f, fresh_x ? T(0) : T(1),
                      gx.data<T>(), in_f);
      if (gw.defined())
        kernels::gemm(true, false, out_f, in_f, rows, T(1), g, out_f, xv.data<T>(), in_f, T(1), gw.data<T>(), in_f);
      if (gb.defined()) { // column sums of dy; threads take column blocks, rows summed in order
        T* db = gb.data<T>();
        constexpr std::int64_t kBlock = 64;
#pragma omp parallel for schedule(static) if (rows * out_f >= kernels::kParallelElements)
        for (std::int64_t c0 = 0; c0 < out_f; c0 += kBlock) {
          const std::int64_t c1 = std::min(out_f, c0 + kBlock);
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t o = c0; o < c1; ++o) db[o] += g[r * out_f + o];
        }
      }
    });
  });
}

} // namespace headgrad::ops
