// layer_norm.cpp - LayerNorm over the last axis, fused: one pass forward, one pass backward, and
// the same after a residual add (add_layer_norm).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/nn_ops.hpp"

namespace headgrad::book {

// forward:  mean = sum_i x_i / D;  var = sum_i (x_i - mean)^2 / D (biased, as torch.nn.LayerNorm);
//           rstd = 1 / sqrt(var + eps);  y_i = (x_i - mean) rstd w_i + b_i      (per row of D)
//           stats = (mean, rstd) per row, kept for the backward. A row of finite values whose sum
//           or squares overflow T (float32 from |x| ~ 1e19) is normalised as x / c, c a power of two
//           near max |x| (an exact division): mean = c mean(x / c), rstd = 1 / sqrt(c^2 var(x / c) +
//           eps), that sum never formed (it may not fit in T where its root does).
template <typename T>
void layer_norm_forward(T* y, T* stats, const T* x, const T* w, const T* b, std::int64_t rows, std::int64_t D, T eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * D;
    auto moments = [&](T c, T& mean, T& var) { // of x / c, two passes
      mean = var = 0;
      for (std::int64_t i = 0; i < D; ++i) mean += xr[i] / c;
      mean /= static_cast<T>(D);
      for (std::int64_t i = 0; i < D; ++i) var += (xr[i] / c - mean) * (xr[i] / c - mean);
      var /= static_cast<T>(D);
    };
    T mean, var, largest = 0;
    moments(T(1), mean, var);
    T rstd = T(1) / std::sqrt(var + eps);
    for (std::int64_t i = 0; i < D; ++i) largest = std::max(largest, std::abs(xr[i]));
    if (!std::isfinite(var) && std::isfinite(largest) && largest != T(0)) {
      const T c = std::ldexp(T(1), std::ilogb(largest));
      moments(c, mean, var);
      mean *= c;
      rstd = T(1) / std::hypot(c * std::sqrt(var), std::sqrt(eps));
    }
    for (std::int64_t i = 0; i < D; ++i) y[r * D + i] = (xr[i] - mean) * rstd * w[i] + b[i];
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}
HEADGRAD_BOOK_LOOP(layer_norm_forward);

// s = a + b, then layer_norm_forward of s (s is kept: the backward's input).
template <typename T>
void add_layer_norm_forward(T* y, T* s, T* stats, const T* a, const T* b, const T* w, const T* bias, std::int64_t rows,
                            std::int64_t D, T eps) {
  for (std::int64_t i = 0; i < rows * D; ++i) s[i] = a[i] + b[i];
  layer_norm_forward(y, stats, s, w, bias, rows, D, eps);
}
HEADGRAD_BOOK_LOOP(add_layer_norm_forward);

// VJP:      xhat = (x - mean) rstd;  g = dy w;  dx = rstd (g - mean(g) - xhat mean(g xhat))
//           dw = sum_rows dy xhat;  db = sum_rows dy          (layer_norm derives it)
// Any of dx, dw, db may be null (not needed); each has its first_write flag.
template <typename T>
void layer_norm_backward(T* dx, bool dx_first, T* dw, bool dw_first, T* db, bool db_first, const T* dy, const T* x,
                         const T* w, const T* stats, std::int64_t rows, std::int64_t D) {
  for (std::int64_t i = 0; i < D; ++i) { // dw, db: one sum over the rows per element
    T sw = 0, sb = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      sw += dy[r * D + i] * ((x[r * D + i] - stats[2 * r]) * stats[2 * r + 1]);
      sb += dy[r * D + i];
    }
    if (dw) store_grad(dw[i], sw, dw_first);
    if (db) store_grad(db[i], sb, db_first);
  }
  for (std::int64_t r = 0; r < rows && dx; ++r) {
    const T mean = stats[2 * r], rstd = stats[2 * r + 1];
    auto g = [&](std::int64_t i) { return dy[r * D + i] * w[i]; };
    auto xhat = [&](std::int64_t i) { return (x[r * D + i] - mean) * rstd; };
    T sg = 0, sgx = 0;
    for (std::int64_t i = 0; i < D; ++i) {
      sg += g(i);
      sgx += g(i) * xhat(i);
    }
    const T mg = sg / static_cast<T>(D), mgx = sgx / static_cast<T>(D); // mean(g), mean(g xhat)
    for (std::int64_t i = 0; i < D; ++i) store_grad(dx[r * D + i], rstd * (g(i) - mg - xhat(i) * mgx), dx_first);
  }
}
HEADGRAD_BOOK_LOOP(layer_norm_backward);

} // namespace headgrad::book

namespace headgrad::ops {

static void check_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const char* op) {
  if (x.dim() < 1) throw std::invalid_argument(fmt::format("{}: input must have at least one axis", op));
  const std::int64_t D = x.shape().back();
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && !(p->shape() == Dims{D}))
      throw std::invalid_argument(fmt::format("{}: {} {} must be [{}] for input {}", op, p == &weight ? "weight" : "bias",
                                              p->shape(), D, x.shape()));
  for (const Tensor* p : {&weight, &bias})
    if (p->defined() && p->dtype() != x.dtype())
      throw std::invalid_argument(fmt::format("{}: dtypes differ: input {} {}, {} {} {}", op, x.shape(),
                                              dtype_name(x.dtype()), p == &weight ? "weight" : "bias", p->shape(),
                                              dtype_name(p->dtype())));
}

// The rows LayerNorm normalises: every axis but the last (D = 0 too: rows of no elements, an empty
// result, as PyTorch).
static std::int64_t rows_of(const Tensor& x) { return Dims(x.shape().begin(), x.shape().end() - 1).numel(); }

// Without affine parameters (PyTorch's elementwise_affine=False, or weight/bias None) the kernel
// gets w = 1 and b = 0: constants that need no gradient, so the backward skips them.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined(x, "layer_norm", "x");
  check_layer_norm(x, weight, bias, "layer_norm");
  const std::int64_t D = x.shape().back();
  const Tensor w = weight.defined() ? weight : Tensor::ones({D}, x.dtype());
  const Tensor b = bias.defined() ? bias : Tensor::zeros({D}, x.dtype());
  OpTimer timer("layer_norm");
  Tensor xc = x.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  const std::int64_t rows = rows_of(x);
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

Tensor add_layer_norm(const Tensor& x, const Tensor& y, const Tensor& weight, const Tensor& bias, double eps) {
  check_defined(x, "add_layer_norm", "x");
  check_defined(y, "add_layer_norm", "y");
  if (!(x.shape() == y.shape()) || x.dtype() != y.dtype())
    throw std::invalid_argument(fmt::format("add_layer_norm: x {} {} and y {} {} must have one shape and dtype",
                                            x.shape(), dtype_name(x.dtype()), y.shape(), dtype_name(y.dtype())));
  check_layer_norm(x, weight, bias, "add_layer_norm");
  const std::int64_t D = x.shape().back(), rows = rows_of(x);
  // without weight or bias: 1 and 0, constants without a gradient (as layer_norm)
  const Tensor w = weight.defined() ? weight : Tensor::ones({D}, x.dtype());
  const Tensor b = bias.defined() ? bias : Tensor::zeros({D}, x.dtype());
  OpTimer timer("add_layer_norm");
  const Tensor xc = x.contiguous(), yc = y.contiguous(), wc = w.contiguous(), bc = b.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype()), s = new_tensor(x.shape(), x.dtype());
  Tensor stats = new_tensor({rows, 2}, x.dtype());
  dispatch_float(x.dtype(), "add_layer_norm", [&]<typename T>() {
    kernels::add_layer_norm_forward<T>(out.data<T>(), s.data<T>(), stats.data<T>(), xc.data<T>(), yc.data<T>(),
                                       wc.data<T>(), bc.data<T>(), rows, D, static_cast<T>(eps));
  });
  // forward: s = x + y;  out = layer_norm(s)     (AddNorm's residual and its norm, one pass)
  // VJP:     ds from layer_norm's VJP (dw, db as there);  dx += ds;  dy += ds
  return record(out, "add_layer_norm", {xc, yc, wc, bc}, [s, stats, rows, D](Node& n, const Tensor& dout) {
    const Tensor w = n.input(2);
    const GradBuffer dw = n.grad_buffer(2), db = n.grad_buffer(3);
    Tensor ds = new_tensor(s.shape(), s.dtype());
    dispatch_float(dout.dtype(), "add_layer_norm", [&]<typename T>() {
      kernels::layer_norm_backward<T>(ds.data<T>(), true, dw.data<T>(), dw.first_write, db.data<T>(), db.first_write,
                                      dout.data<T>(), s.data<T>(), w.data<T>(), stats.data<T>(), rows, D);
    });
    n.add_to_grad(1, ds);
    n.add_to_grad(0, std::move(ds));
  });
}

} // namespace headgrad::ops
