// unary.cpp - exp, log, sqrt, pow (scalar exponent), tanh, relu, gelu.
// Each op is a forward formula and a local derivative written in terms of x and/or y; one
// template runs the loop for all of them, and the VJP is always dx += dy * dy/dx.
#include <cmath>
#include <fmt/format.h>
#include <numbers>

#include "framework/autograd.hpp"
#include "framework/kernels/parallel.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {
namespace {

// Op::f(x) -> y and Op::df(x, y) -> dy/dx. The backward keeps x (the input) and y (the output).
template <typename Op> Tensor unary(const Tensor& x, const Op& op, const char* name) {
  ForwardTimer timer(name);
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    const T* __restrict px = xc.data<T>();
    T* __restrict y = out.data<T>();
    const std::int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelElements)
    for (std::int64_t i = 0; i < n; ++i) y[i] = op.template f<T>(px[i]);
  });
  Tensor saved_y = out.detach();
  // VJP:    dx_i += dy_i * f'(x_i)       shapes: x, y, dy, dx all the same (contiguous)
  return record(out, name, {xc}, [op, saved_y, name](Node& n, const Tensor& gy) {
    bool assign = false;
    Tensor gx = n.grad_for_write(0, assign);
    Tensor xv = n.input(0);
    dispatch_float(gx.dtype(), name, [&]<typename T>() {
      // __restrict: the gradient buffer never aliases x, y or dy, and saying so lets the compiler
      // vectorise the loop (measured 20x faster for relu at 131k elements).
      const T* __restrict px = xv.data<T>();
      const T* __restrict y = saved_y.data<T>();
      const T* __restrict g = gy.data<T>();
      T* __restrict d = gx.data<T>();
      const std::int64_t m = gx.numel();
      if (assign) {
#pragma omp parallel for schedule(static) if (m >= kernels::kParallelElements)
        for (std::int64_t i = 0; i < m; ++i) d[i] = g[i] * op.template df<T>(px[i], y[i]);
      } else {
#pragma omp parallel for schedule(static) if (m >= kernels::kParallelElements)
        for (std::int64_t i = 0; i < m; ++i) d[i] += g[i] * op.template df<T>(px[i], y[i]);
      }
    });
  });
}

struct Exp { // y = e^x;  dy/dx = y
  template <typename T> T f(T x) const { return std::exp(x); }
  template <typename T> T df(T, T y) const { return y; }
};
struct Log { // y = ln x;  dy/dx = 1/x
  template <typename T> T f(T x) const { return std::log(x); }
  template <typename T> T df(T x, T) const { return T(1) / x; }
};
struct Sqrt { // y = sqrt(x);  dy/dx = 1 / (2 y)
  template <typename T> T f(T x) const { return std::sqrt(x); }
  template <typename T> T df(T, T y) const { return T(0.5) / y; }
};
struct Pow { // y = x^p;  dy/dx = p x^(p-1)
  double p;
  template <typename T> T f(T x) const { return std::pow(x, static_cast<T>(p)); }
  template <typename T> T df(T x, T) const {
    if (p == 0.0) return T(0);
    return static_cast<T>(p) * std::pow(x, static_cast<T>(p - 1.0));
  }
};
struct Tanh { // y = tanh x;  dy/dx = 1 - y^2
  template <typename T> T f(T x) const { return std::tanh(x); }
  template <typename T> T df(T, T y) const { return T(1) - y * y; }
};
struct Relu { // y = max(x, 0);  dy/dx = [x > 0] (0 at x = 0, as PyTorch); NaN stays NaN, as PyTorch
  template <typename T> T f(T x) const { return x > T(0) || x != x ? x : T(0); }
  template <typename T> T df(T x, T) const { return static_cast<T>(x > T(0)); } // branch-free
};
// y = 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2/pi)
// dy/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2)
struct Gelu {
  template <typename T> static T u(T x) {
    const T c = static_cast<T>(std::numbers::sqrt2 / std::sqrt(std::numbers::pi));
    return c * (x + T(0.044715) * x * x * x);
  }
  template <typename T> T f(T x) const { return T(0.5) * x * (T(1) + std::tanh(u(x))); }
  template <typename T> T df(T x, T) const {
    const T c = static_cast<T>(std::numbers::sqrt2 / std::sqrt(std::numbers::pi));
    const T t = std::tanh(u(x));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3 * 0.044715) * x * x);
  }
};

} // namespace

Tensor exp(const Tensor& x) { return unary(x, Exp{}, "exp"); }
Tensor log(const Tensor& x) { return unary(x, Log{}, "log"); }
Tensor sqrt(const Tensor& x) { return unary(x, Sqrt{}, "sqrt"); }
Tensor pow(const Tensor& x, double p) { return unary(x, Pow{p}, "pow"); }
Tensor tanh(const Tensor& x) { return unary(x, Tanh{}, "tanh"); }
Tensor relu(const Tensor& x) { return unary(x, Relu{}, "relu"); }
Tensor gelu(const Tensor& x) { return unary(x, Gelu{}, "gelu"); }

} // namespace headgrad::ops
