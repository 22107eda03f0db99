// elementwise.cpp - add, sub, mul, div, pow with NumPy broadcasting; neg and the scalar variants.
//
// Backward of a broadcast: an input read with stride 0 along an axis received the same value at
// every position of that axis, so its gradient is the sum over that axis. Node::add_to_grad does
// that sum, so each backward below is the derivative itself.
#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/ops/map.hpp"
#include "framework/ops/compare.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/promotion.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad::ops {
namespace {

// y = f(a, b), broadcast, and the operands it was computed from; the caller records the backward
// with those operands. An int64 or bool operand next to a float one is read as that float type,
// and so is a 0-d float operand next to a dimensioned one of the other float type (promotion.hpp):
// the converted operand is what the op records, so an integer one needs no gradient and a 0-d
// float64 one gets its gradient back in float64 through the conversion.
// arithmetic_operands also refuses an undefined operand, naming the op.
struct Binary {
  Tensor y, a, b;
};
template <typename F> Binary binary_forward(const Tensor& a_in, const Tensor& b_in, const char* name, const F& f) {
  // Plain references, not a structured binding: the lambda below captures them, which clang
  // accepts only from version 16 (P1091), and the fuzz build uses clang 14.
  const std::pair<Tensor, Tensor> operands = arithmetic_operands(a_in, b_in, name);
  const Tensor& a = operands.first;
  const Tensor& b = operands.second;
  const Dims s = broadcast_shapes(a.shape(), b.shape(), name);
  OpTimer timer(name);
  Tensor out = new_tensor(s, a.dtype());
  dispatch_float(a.dtype(), name, [&]<typename T>() {
    book::zip_broadcast<T>(out.data<T>(), a.data<T>(), broadcast_strides(a.shape(), a.strides(), s), b.data<T>(),
                           broadcast_strides(b.shape(), b.strides(), s), s, [&f](T x, T y) { return f(x, y); });
  });
  return {out, a, b};
}

} // namespace

// Each backward below receives dy (the output's shape); add_to_grad sums it over whatever axes
// the input was broadcast along.

Tensor add(const Tensor& a, const Tensor& b) {
  const Binary r = binary_forward(a, b, "add", [](auto x, auto z) { return x + z; });
  // forward: y = a + b        local: dy/da = 1, dy/db = 1
  // VJP:     da += dy;  db += dy
  return record(r.y, "add", {r.a, r.b}, [](Node& n, const Tensor& dy) {
    n.add_to_grad(0, dy); // a residual connection's add hands dy itself on: no copy
    n.add_to_grad(1, dy);
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  check_defined(a, "sub", "a");
  check_defined(b, "sub", "b");
  if (a.dtype() == DType::bool8 || b.dtype() == DType::bool8) // as PyTorch: a - on masks is a likely slip
    throw std::invalid_argument(fmt::format("sub: subtracting a bool tensor ({} {} - {} {}) is not supported; use "
                                            "logical_not, or convert with to_dtype",
                                            a.shape(), dtype_name(a.dtype()), b.shape(), dtype_name(b.dtype())));
  const Binary r = binary_forward(a, b, "sub", [](auto x, auto z) { return x - z; });
  // forward: y = a - b        local: dy/da = 1, dy/db = -1
  // VJP:     da += dy;  db -= dy
  return record(r.y, "sub", {r.a, r.b}, [](Node& n, const Tensor& dy) {
    n.add_to_grad(0, dy);
    n.add_to_grad(1, dy, -1.0);
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const Binary r = binary_forward(a, b, "mul", [](auto x, auto z) { return x * z; });
  // forward: y = a * b        local: dy/da = b, dy/db = a
  // VJP:     da += dy * b;  db += dy * a
  return record(r.y, "mul", {r.a, r.b}, [](Node& n, const Tensor& dy) {
    const Tensor a = n.input(0), b = n.input(1);
    if (n.needs_grad(0)) n.add_to_grad(0, dy * b);
    if (n.needs_grad(1)) n.add_to_grad(1, dy * a);
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  const Binary r = binary_forward(a, b, "div", [](auto x, auto z) { return x / z; });
  // forward: y = a / b        local: dy/da = 1 / b, dy/db = -a / b^2 = -(a / b) / b
  // VJP:     da += dy / b;  db -= dy * ((a / b) / b)
  // (a / b) / b, not a / (b b): b b overflows or goes subnormal long before the quotient does
  // (float32 a = 1e30, b = 1e20: b b = inf). It is PyTorch's formula, with y = a / b kept.
  const Tensor y_saved = r.y.detach();
  return record(r.y, "div", {r.a, r.b}, [y_saved](Node& n, const Tensor& dy) {
    const Tensor b = n.input(1);
    if (n.needs_grad(0)) n.add_to_grad(0, dy / b);
    if (n.needs_grad(1)) n.add_to_grad(1, dy * (y_saved / b), -1.0);
  });
}

Tensor pow(const Tensor& a, const Tensor& b) {
  const Binary r = binary_forward(a, b, "pow", [](auto x, auto z) { return std::pow(x, z); });
  // forward: y = a^b          local: dy/da = b a^(b-1), dy/db = a^b ln a = y ln a
  // VJP:     da += dy * b a^(b-1)   (0 where b == 0: a^0 = 1 for every a, even a = 0)
  //          db += dy * y ln a      (0 where a == 0 and b >= 0: 0^b is flat or one-sided there)
  // The two zeros are PyTorch's (pow_backward_self, pow_backward_exponent).
  const Tensor y_saved = r.y.detach();
  return record(r.y, "pow", {r.a, r.b}, [y_saved](Node& n, const Tensor& dy) {
    const auto [a, b] = arithmetic_operands(n.input(0), n.input(1), "pow"); // an integer exponent as float
    const Tensor zero = Tensor::zeros({}, dy.dtype());
    if (n.needs_grad(0)) n.add_to_grad(0, dy * where(eq(b, 0.0), zero, b * pow(a, b - 1.0)));
    if (n.needs_grad(1)) n.add_to_grad(1, dy * where(logical_and(eq(a, 0.0), ge(b, 0.0)), zero, y_saved * log(a)));
  });
}

// y = alpha * x + beta, elementwise, for the scalar variants and neg.
static Tensor affine(const Tensor& x, double alpha, double beta, const char* name) {
  check_defined(x, name, "x");
  OpTimer timer(name);
  Tensor out = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    book::map_strided<T>(out.data<T>(), x.data<T>(), x.shape(), x.strides(), [al, be](T v) { return al * v + be; });
  });
  // forward: y = alpha x + beta      local: dy/dx = alpha
  // VJP:     dx += alpha dy
  return record(out, name, {x}, [alpha](Node& n, const Tensor& dy) { n.add_to_grad(0, dy, alpha); });
}

Tensor neg(const Tensor& x) { return affine(x, -1.0, 0.0, "neg"); }
Tensor add_scalar(const Tensor& x, double s) { return affine(x, 1.0, s, "add_scalar"); }
Tensor mul_scalar(const Tensor& x, double s) { return affine(x, s, 0.0, "mul_scalar"); }
Tensor rsub_scalar(const Tensor& x, double s) { return affine(x, -1.0, s, "rsub_scalar"); }

Tensor rdiv_scalar(const Tensor& x, double s) {
  check_defined(x, "rdiv_scalar", "x");
  OpTimer timer("rdiv_scalar");
  Tensor out = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "rdiv_scalar", [&]<typename T>() {
    const T st = static_cast<T>(s);
    book::map_strided<T>(out.data<T>(), x.data<T>(), x.shape(), x.strides(), [st](T v) { return st / v; });
  });
  // forward: y = s / x        local: dy/dx = -s / x^2 = -y / x
  // VJP:     dx -= dy * (y / x)    (y / x, not s / x^2: see div)
  const Tensor y = out.detach();
  return record(out, "rdiv_scalar", {x}, [y](Node& n, const Tensor& dy) {
    n.add_to_grad(0, dy * (y / n.input(0)), -1.0);
  });
}

} // namespace headgrad::ops
