// unary.cpp - exp, log, sqrt, pow (scalar exponent), tanh, relu, gelu, abs, sigmoid, clamp.
// Each op is a forward formula and a local derivative written in terms of x and/or y; one
// template runs the loop for all of them, and the VJP is always dx += dy * dy/dx.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/map.hpp"
#include "framework/ops/ops.hpp"

// The book's loops of the kernels exp, log and tanh run (kernels::exp_n, log_n, tanh_n: the
// engine's are SLEEF's vector functions, within 1 ulp), and of GELU's forms with their derivative
// (kernels::gelu_rows; the formulas are gelu's, below).
namespace headgrad::book {

template <typename T> void exp_n(T* y, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
template <typename T> void log_n(T* y, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}
template <typename T> void tanh_n(T* y, const T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}
HEADGRAD_BOOK_LOOP(exp_n);
HEADGRAD_BOOK_LOOP(log_n);
HEADGRAD_BOOK_LOOP(tanh_n);

// u = z + bias[c] (no bias: u = z), y = gelu(u) and, when dydu is not null, dydu = gelu'(u), for a
// (rows, cols) buffer. y may be z.
template <typename T>
void gelu_rows(T* y, T* dydu, const T* z, const T* bias, std::int64_t rows, std::int64_t cols, kernels::GeluForm form) {
  const T c = std::sqrt(T(2) / std::numbers::pi_v<T>), kappa = T(0.044715);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t at = r * cols + j;
      const T u = bias ? z[at] + bias[j] : z[at];
      T phi_term, d; // y = u * phi_term; d = dy/du
      if (form == kernels::GeluForm::erf) {
        phi_term = T(0.5) * (T(1) + std::erf(u / std::numbers::sqrt2_v<T>));                       // Phi(u)
        d = phi_term + u * std::exp(-u * u / 2) / std::sqrt(2 * std::numbers::pi_v<T>);            // + u phi(u)
      } else {
        const T th = std::tanh(c * (u + kappa * u * u * u));
        phi_term = T(0.5) * (T(1) + th);
        d = phi_term + T(0.5) * u * (T(1) - th * th) * c * (T(1) + 3 * kappa * u * u);
      }
      y[at] = u * phi_term;
      if (dydu) dydu[at] = d;
    }
}
HEADGRAD_BOOK_LOOP(gelu_rows);

} // namespace headgrad::book

namespace headgrad::ops {
namespace {

// y = f(x) for n elements: Op::f_n over the whole buffer where the op has one (a vectorised
// kernel), else Op::f element by element. (Two overloads rather than `if constexpr`: the branch
// not taken is never compiled, in every compiler.)
template <typename T, typename Op>
  requires requires { Op::template f_n<T>(nullptr, nullptr, 0); }
void forward_values(T* y, const T* x, std::int64_t n, const Op&) {
  Op::template f_n<T>(y, x, n);
}
template <typename T, typename Op> void forward_values(T* y, const T* x, std::int64_t n, const Op& op) {
  book::map<T>(y, x, n, [&op](T v) { return op.template f<T>(v); });
}

// Op::f(x) -> y, or Op::f_n(y, x, n) over the whole buffer (a vectorised kernel), and
// Op::df(x, y) -> dy/dx. The backward keeps x (the input) and y (the output).
template <typename Op> Tensor unary(const Tensor& x, const Op& op, const char* name) {
  check_defined(x, name, "x");
  OpTimer timer(name);
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), name,
                 [&]<typename T>() { forward_values<T>(out.data<T>(), xc.data<T>(), out.numel(), op); });
  // VJP:     dx += dy * f'(x, y)      shapes: x, y, dy, dx all the same (contiguous)
  const Tensor y = out.detach();
  return record(out, name, {xc}, [op, y, name](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    const Tensor x = n.input(0);
    dispatch_float(dy.dtype(), name, [&]<typename T>() {
      book::map_backward<T>(dx.data<T>(), dx.first_write, dy.data<T>(), x.data<T>(), y.data<T>(), dy.numel(),
                            [&op](T xv, T yv) { return op.template df<T>(xv, yv); });
    });
  });
}

// exp, log and tanh run SLEEF's vector functions (kernels/vector_math.hpp), within 1 ulp.
struct Exp { // y = e^x;  dy/dx = y
  template <typename T> static void f_n(T* y, const T* x, std::int64_t n) { kernels::exp_n(y, x, n); }
  template <typename T> T df(T, T y) const { return y; }
};
struct Log { // y = ln x;  dy/dx = 1/x
  template <typename T> static void f_n(T* y, const T* x, std::int64_t n) { kernels::log_n(y, x, n); }
  template <typename T> T df(T x, T) const { return T(1) / x; }
};
struct Sqrt { // y = sqrt(x);  dy/dx = 1 / (2 y)
  template <typename T> T f(T x) const { return std::sqrt(x); }
  template <typename T> T df(T, T y) const { return T(0.5) / y; }
};
// x^p as PyTorch computes it for a scalar exponent: sqrt, rsqrt, reciprocal and products for the
// exponents it special-cases. Not just std::pow: the results differ at the edges
// (pow(-inf, 0.5) = +inf but sqrt(-inf) = NaN; pow(-0, -0.5) = +inf but 1 / sqrt(-0) = -inf).
template <typename T> T torch_pow(T x, double p) {
  if (p == 0.5) return std::sqrt(x);
  if (p == -0.5) return T(1) / std::sqrt(x);
  if (p == 1.0) return x;
  if (p == 2.0) return x * x;
  if (p == 3.0) return x * x * x;
  if (p == -1.0) return T(1) / x;
  if (p == -2.0) return T(1) / (x * x);
  return std::pow(x, static_cast<T>(p));
}
struct Pow { // y = x^p;  dy/dx = p x^(p-1), 0 for p = 0 (as PyTorch)
  double p;
  template <typename T> T f(T x) const { return p == 0.0 ? T(1) : torch_pow(x, p); }
  template <typename T> T df(T x, T) const { return p == 0.0 ? T(0) : static_cast<T>(p) * torch_pow(x, p - 1.0); }
};
struct Tanh { // y = tanh x;  dy/dx = 1 - y^2
  template <typename T> static void f_n(T* y, const T* x, std::int64_t n) { kernels::tanh_n(y, x, n); }
  template <typename T> T df(T, T y) const { return T(1) - y * y; }
};
// y = max(x, 0);  dy/dx = [not x <= 0]: 0 at x = 0, and 1 at NaN, which stays NaN and passes dy
// on (PyTorch's threshold_backward tests x <= 0 too)
struct Relu {
  template <typename T> T f(T x) const { return x > T(0) || x != x ? x : T(0); }
  template <typename T> T df(T x, T) const { return static_cast<T>(!(x <= T(0))); } // branch-free
};
struct Abs { // y = |x|;  dy/dx = sign(x), 0 at 0 and at NaN (PyTorch's sgn)
  template <typename T> T f(T x) const { return std::abs(x); }
  template <typename T> T df(T x, T) const { return static_cast<T>((x > T(0)) - (x < T(0))); }
};
struct Sigmoid { // y = 1 / (1 + e^-x);  dy/dx = y (1 - y)
  template <typename T> T f(T x) const { return T(1) / (T(1) + std::exp(-x)); }
  template <typename T> T df(T, T y) const { return y * (T(1) - y); }
};
// y = min(max(x, lo), hi) (hi wins when lo > hi; NaN stays NaN);  dy/dx = [lo <= x <= hi], bounds
// included and NaN excluded, as PyTorch. An absent bound is -inf or +inf.
struct Clamp {
  double lo, hi;
  template <typename T> T f(T x) const {
    return x != x ? x : std::min(std::max(x, static_cast<T>(lo)), static_cast<T>(hi));
  }
  template <typename T> T df(T x, T) const { return static_cast<T>(x >= static_cast<T>(lo) && x <= static_cast<T>(hi)); }
};
// y = min(max(x, lo), hi) as clamp, but the derivative is [lo < x < hi]: 0 on the bounds, where
// clamp's is 1 (PyTorch's hardtanh_backward; the bounds are where the line meets the flat parts,
// and either one-sided derivative is a valid subgradient there). NaN: y = NaN, dy/dx = 0.
struct Hardtanh {
  double lo, hi;
  template <typename T> T f(T x) const {
    return x != x ? x : std::min(std::max(x, static_cast<T>(lo)), static_cast<T>(hi));
  }
  template <typename T> T df(T x, T) const { return static_cast<T>(x > static_cast<T>(lo) && x < static_cast<T>(hi)); }
};
} // namespace

Tensor exp(const Tensor& x) { return unary(x, Exp{}, "exp"); }
Tensor log(const Tensor& x) { return unary(x, Log{}, "log"); }
Tensor sqrt(const Tensor& x) { return unary(x, Sqrt{}, "sqrt"); }
Tensor pow(const Tensor& x, double p) { return unary(x, Pow{p}, "pow"); }
Tensor tanh(const Tensor& x) { return unary(x, Tanh{}, "tanh"); }
Tensor relu(const Tensor& x) { return unary(x, Relu{}, "relu"); }
// GELU, y = x Phi(x) (Hendrycks & Gimpel, "Gaussian Error Linear Units", 2016), in the two forms
// of torch.nn.functional.gelu, with the arithmetic of PyTorch's CPU kernel (kernels::gelu_rows).
// approximate='none' (PyTorch's default), Phi the standard normal CDF:
//   y = 0.5 x (1 + erf(x / sqrt 2))
//   dy/dx = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
// approximate='tanh': y = 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2/pi)
//   dy/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2)
// The forward computes dy/dx with y in the same pass (it shares erf's exponential), and the
// backward keeps it instead of x.
// VJP:     dx += dy * dy/dx          shapes: x, y, dy, dx all the same (contiguous)
Tensor gelu(const Tensor& x, GeluApproximate approximate) {
  check_defined(x, "gelu", "x");
  OpTimer timer("gelu");
  const Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const bool keep = will_record({&xc});
  const Tensor dydx = keep ? new_tensor(x.shape(), x.dtype()) : Tensor();
  const auto form = approximate == GeluApproximate::tanh ? kernels::GeluForm::tanh : kernels::GeluForm::erf;
  dispatch_float(x.dtype(), "gelu", [&]<typename T>() {
    kernels::gelu_rows<T>(out.data<T>(), keep ? dydx.data<T>() : nullptr, xc.data<T>(), nullptr, 1, out.numel(), form);
  });
  return record(out, "gelu", {xc}, [dydx](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    dispatch_float(dy.dtype(), "gelu", [&]<typename T>() {
      book::map_backward<T>(dx.data<T>(), dx.first_write, dy.data<T>(), dydx.data<T>(), dydx.data<T>(), dy.numel(),
                            [](T d, T) { return d; });
    });
  });
}
Tensor abs(const Tensor& x) { return unary(x, Abs{}, "abs"); }
Tensor sigmoid(const Tensor& x) { return unary(x, Sigmoid{}, "sigmoid"); }

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  check_defined(x, "clamp", "x");
  if (!min && !max) throw std::invalid_argument(fmt::format("clamp: give min, max or both (input {})", x.shape()));
  constexpr double inf = std::numeric_limits<double>::infinity();
  return unary(x, Clamp{min.value_or(-inf), max.value_or(inf)}, "clamp");
}

Tensor hardtanh(const Tensor& x, double min_val, double max_val) {
  check_defined(x, "hardtanh", "x");
  if (!(min_val <= max_val))
    throw std::invalid_argument(
        fmt::format("hardtanh: min_val {} is greater than max_val {} (input {})", min_val, max_val, x.shape()));
  return unary(x, Hardtanh{min_val, max_val}, "hardtanh");
}

} // namespace headgrad::ops
