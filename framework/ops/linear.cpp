// linear.cpp - y = x W^T + b as one gemm each way (nn.Linear's F.linear), and the same with the
// ReLU that follows it in a position-wise FFN, or the GELU of a GPT MLP, fused in.
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/map.hpp"
#include "framework/ops/nn_ops.hpp"

// The book's loops of a bias added to every row of a (rows, cols) matrix and of its gradient, the
// column sums (linear's forward fills y with b, or r + b, and its gemm adds x W^T with beta 1).
namespace headgrad::book {

// y[r, :] = b for every row.
template <typename T> void fill_rows(T* y, const T* b, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = b[c];
}
HEADGRAD_BOOK_LOOP(fill_rows);

// y[r, :] = res[r, :] + b for every row, or res alone when b is null.
template <typename T> void add_rows(T* y, const T* res, const T* b, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = b ? res[r * cols + c] + b[c] : res[r * cols + c];
}
HEADGRAD_BOOK_LOOP(add_rows);

// out[c] = or += sum_r x[r, c] (first_write: =): db = sum_rows dy.
template <typename T> void column_sums(T* out, bool first_write, const T* x, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t c = 0; c < cols; ++c) {
    T sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) sum += x[r * cols + c];
    store_grad(out[c], sum, first_write);
  }
}
HEADGRAD_BOOK_LOOP(column_sums);

} // namespace headgrad::book

namespace headgrad::ops {
namespace {

struct LinearDims {
  std::int64_t rows, in_f, out_f;
};

LinearDims check_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  check_defined(x, op, "x");
  check_defined(weight, op, "weight");
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("{}: weight must be (out, in), got {}", op, weight.shape()));
  const std::int64_t out_f = weight.shape()[0], in_f = weight.shape()[1];
  if (x.dim() < 1 || x.shape().back() != in_f)
    throw std::invalid_argument(fmt::format("{}: input {} does not end in in_features = {} (weight {})", op, x.shape(),
                                            in_f, weight.shape()));
  if (bias.defined() && !(bias.shape() == Dims{out_f}))
    throw std::invalid_argument(fmt::format("{}: bias {} does not match out_features = {} (weight {})", op,
                                            bias.shape(), out_f, weight.shape()));
  if (x.dtype() != weight.dtype() || (bias.defined() && bias.dtype() != x.dtype()))
    throw std::invalid_argument(fmt::format("{}: dtypes differ: input {} {}, weight {} {}", op, x.shape(),
                                            dtype_name(x.dtype()), weight.shape(), dtype_name(weight.dtype())));
  return {Dims(x.shape().begin(), x.shape().end() - 1).numel(), in_f, out_f}; // not numel / in: in may be 0
}

// out (rows, out_f) = x W^T + b, for contiguous x and W.
Tensor linear_forward(const Tensor& x, const Tensor& W, const Tensor& bias, const LinearDims& d) {
  Dims oshape = x.shape();
  oshape[oshape.size() - 1] = d.out_f;
  Tensor out = new_tensor(oshape, x.dtype());
  dispatch_float(x.dtype(), "linear", [&]<typename T>() {
    T* y = out.data<T>();
    if (bias.defined()) kernels::fill_rows<T>(y, bias.contiguous().data<T>(), d.rows, d.out_f); // y = b in every row
    // y (+)= x W^T: W (out, in) read with the Trans flag
    kernels::gemm<T>(false, true, d.rows, d.out_f, d.in_f, T(1), x.data<T>(), d.in_f, W.data<T>(), d.in_f,
                     bias.defined() ? T(1) : T(0), y, d.out_f);
  });
  return out;
}

// forward: y[r, o] = sum_i x[r, i] W[o, i] + b[o]
// local:   dy[r,o]/dx[r,i] = W[o,i];  dy[r,o]/dW[o,i] = x[r,i];  dy[r,o]/db[o] = 1
// VJP:     dx += dy W          (rows, out) @ (out, in)
//          dW += dy^T x        (out, rows) @ (rows, in): dy read with the Trans flag
//          db += sum_r dy[r, :]
// shapes:  x, dx: (..., in) as (rows, in); W, dW: (out, in); b, db: (out); y, dy: (rows, out)
void linear_backward(Node& n, const Tensor& dy, const LinearDims& d) {
  const Tensor x = n.input(0), W = n.input(1);
  const GradBuffer dx = n.grad_buffer(0), dW = n.grad_buffer(1), db = n.grad_buffer(2);
  dispatch_float(dy.dtype(), "linear", [&]<typename T>() {
    auto beta = [](const GradBuffer& g) { return g.first_write ? T(0) : T(1); };
    if (dx) kernels::gemm<T>(false, false, d.rows, d.in_f, d.out_f, T(1), dy.data<T>(), d.out_f, W.data<T>(), d.in_f,
                             beta(dx), dx.data<T>(), d.in_f);
    if (dW) kernels::gemm<T>(true, false, d.out_f, d.in_f, d.rows, T(1), dy.data<T>(), d.out_f, x.data<T>(), d.in_f,
                             beta(dW), dW.data<T>(), d.in_f);
    if (db) kernels::column_sums<T>(db.data<T>(), db.first_write, dy.data<T>(), d.rows, d.out_f);
  });
}

} // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const LinearDims d = check_linear(x, weight, bias, "linear");
  OpTimer timer("linear");
  const Tensor xc = x.contiguous(), wc = weight.contiguous();
  Tensor out = linear_forward(xc, wc, bias, d);
  // (the derivation is above linear_backward)
  return record(out, "linear", {xc, wc, bias}, [d](Node& n, const Tensor& dy) { linear_backward(n, dy, d); });
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const LinearDims d = check_linear(x, weight, bias, "linear_relu");
  OpTimer timer("linear_relu");
  const Tensor xc = x.contiguous(), wc = weight.contiguous();
  Tensor out = linear_forward(xc, wc, bias, d);
  dispatch_float(out.dtype(), "linear_relu", [&]<typename T>() { // y = relu(z), in place over z
    book::map_in_place<T>(out.data<T>(), out.numel(), [](T z) { return z > T(0) || z != z ? z : T(0); });
  });
  // forward: z = x W^T + b;  y = relu(z)            (the FFN's first layer, one pass less)
  // VJP:     dz = dy [y > 0]  (y > 0 exactly where z > 0), then linear's VJP with dz
  const Tensor y = out.detach();
  return record(out, "linear_relu", {xc, wc, bias}, [y, d](Node& n, const Tensor& dy) {
    Tensor dz = new_tensor(dy.shape(), dy.dtype());
    dispatch_float(dy.dtype(), "linear_relu", [&]<typename T>() {
      book::map_backward<T>(dz.data<T>(), true, dy.data<T>(), y.data<T>(), y.data<T>(), dy.numel(),
                            [](T yv, T) { return static_cast<T>(yv > T(0)); });
    });
    linear_backward(n, dz, d);
  });
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias, GeluApproximate approximate) {
  const LinearDims d = check_linear(x, weight, bias, "linear_gelu");
  OpTimer timer("linear_gelu");
  const Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.defined() ? bias.contiguous() : bias;
  Dims oshape = x.shape();
  oshape[oshape.size() - 1] = d.out_f;
  Tensor out = new_tensor(oshape, x.dtype());
  const bool keep = will_record({&xc, &wc, &bc});
  const Tensor dydz = keep ? new_tensor(oshape, x.dtype()) : Tensor(); // gelu'(z), for the backward
  const auto form = approximate == GeluApproximate::tanh ? kernels::GeluForm::tanh : kernels::GeluForm::erf;
  // forward: z = x W^T + b;  y = gelu(z) (GPT's c_fc and GELU, one pass less)
  dispatch_float(x.dtype(), "linear_gelu", [&]<typename T>() {
    T* y = out.data<T>();
    kernels::gemm<T>(false, true, d.rows, d.out_f, d.in_f, T(1), xc.data<T>(), d.in_f, wc.data<T>(), d.in_f, T(0), y,
                     d.out_f); // y = x W^T
    OpPart part("gelu");       // in place: y = gelu(y + b), and gelu'(y + b)
    kernels::gelu_rows<T>(y, keep ? dydz.data<T>() : nullptr, y, bc.defined() ? bc.data<T>() : nullptr, d.rows,
                          d.out_f, form);
  });
  // VJP: dz = dy * gelu'(z) (gelu's VJP, with the derivative the forward kept), then linear's
  // VJP with dz
  return record(out, "linear_gelu", {xc, wc, bc}, [dydz, d](Node& n, const Tensor& dy) {
    const Tensor dz = n.overwritable_dy(dy); // dy's own buffer, when nothing else reads dy
    {
      OpPart part("gelu", true);
      dispatch_float(dy.dtype(), "linear_gelu", [&]<typename T>() {
        book::map_backward<T>(dz.data<T>(), true, dy.data<T>(), dydz.data<T>(), dydz.data<T>(), dy.numel(),
                              [](T g, T) { return g; });
      });
    }
    linear_backward(n, dz, d);
  });
}

Tensor linear_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual) {
  const LinearDims d = check_linear(x, weight, bias, "linear_residual");
  check_defined(residual, "linear_residual", "residual");
  Dims oshape = x.shape();
  oshape[oshape.size() - 1] = d.out_f;
  if (residual.shape() != oshape || residual.dtype() != x.dtype())
    throw std::invalid_argument(fmt::format("linear_residual: residual {} {} does not match the output {} {} of input "
                                            "{} and weight {}",
                                            residual.shape(), dtype_name(residual.dtype()), oshape,
                                            dtype_name(x.dtype()), x.shape(), weight.shape()));
  OpTimer timer("linear_residual");
  const Tensor xc = x.contiguous(), wc = weight.contiguous(), rc = residual.contiguous();
  Tensor out = new_tensor(oshape, x.dtype());
  // forward: y = r + x W^T + b (a residual connection around a projection; torch.addmm's
  // beta * input + mat1 @ mat2 with beta = 1): y starts as r + b, and the gemm adds x W^T with
  // beta 1 - the pass that zeroed y for a beta-0 gemm now writes the residual, and the add after
  // the projection is gone.
  dispatch_float(x.dtype(), "linear_residual", [&]<typename T>() {
    T* y = out.data<T>();
    kernels::add_rows<T>(y, rc.data<T>(), bias.defined() ? bias.contiguous().data<T>() : nullptr, d.rows, d.out_f);
    kernels::gemm<T>(false, true, d.rows, d.out_f, d.in_f, T(1), xc.data<T>(), d.in_f, wc.data<T>(), d.in_f, T(1), y,
                     d.out_f);
  });
  // VJP: dr += dy (dy/dr = 1), then linear's VJP with dy for x, W and b
  return record(out, "linear_residual", {xc, wc, bias, rc}, [d](Node& n, const Tensor& dy) {
    linear_backward(n, dy, d);
    n.add_to_grad(3, dy); // dy itself handed on, as add's backward does
  });
}

} // namespace headgrad::ops
