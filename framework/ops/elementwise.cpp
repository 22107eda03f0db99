// elementwise.cpp - add, sub, mul, div with NumPy broadcasting; neg and the scalar variants.
//
// Backward of a broadcast: an input read with stride 0 along an axis received the same value at
// every position of that axis, so its gradient is the sum over that axis. The backward kernels
// get this for free by accumulating through the same stride-0 layout into the gradient buffer.
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/parallel.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/broadcast.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {

Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op) {
  const int r = std::max(a.size(), b.size());
  Dims out;
  out.resize(r);
  for (int i = 0; i < r; ++i) {
    const std::int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(fmt::format("{}: shapes {} and {} cannot be broadcast", op, a, b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Dims broadcast_strides(const Dims& shape, const Dims& strides, const Dims& out) {
  const int r = out.size();
  Dims s;
  s.resize(r);
  for (int i = 0; i < r; ++i) {
    const int j = i - (r - shape.size());
    s[i] = (j < 0 || shape[j] == 1) ? 0 : strides[j];
  }
  return s;
}

namespace {

enum class Bin { add, sub, mul, div };

const char* bin_name(Bin k) {
  switch (k) {
  case Bin::add: return "add";
  case Bin::sub: return "sub";
  case Bin::mul: return "mul";
  case Bin::div: return "div";
  }
  return "?";
}

template <Bin K, typename T> inline T apply(T a, T b) {
  if constexpr (K == Bin::add) return a + b;
  else if constexpr (K == Bin::sub) return a - b;
  else if constexpr (K == Bin::mul) return a * b;
  else return a / b;
}

template <Bin K, typename T> void binary_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  T* y = out.data<T>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const std::int64_t n = out.numel();
  if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) { // fast path: same layout
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelElements)
    for (std::int64_t i = 0; i < n; ++i) y[i] = apply<K>(pa[i], pb[i]);
    return;
  }
  const Dims& s = out.shape();
  const std::array<Dims, 3> st{out.strides(), broadcast_strides(a.shape(), a.strides(), s),
                               broadcast_strides(b.shape(), b.strides(), s)};
  kernels::for_each_row<3>(s, st, [&](const auto& o, std::int64_t m, const auto& in) {
    T* yr = y + o[0];
    const T* ar = pa + o[1];
    const T* br = pb + o[2];
    if (in[1] == 1 && in[2] == 1)
      for (std::int64_t i = 0; i < m; ++i) yr[i] = apply<K>(ar[i], br[i]);
    else if (in[1] == 1 && in[2] == 0)
      for (std::int64_t i = 0; i < m; ++i) yr[i] = apply<K>(ar[i], br[0]);
    else
      for (std::int64_t i = 0; i < m; ++i) yr[i] = apply<K>(ar[i * in[1]], br[i * in[2]]);
  });
}

// forward:  y = a (op) b, broadcast to shape s
// local:    add: dy/da = 1, dy/db = 1          sub: 1, -1
//           mul: dy/da = b, dy/db = a          div: 1/b, -a/b^2
// VJP:      da += sum_over_broadcast(dy * dy/da); db likewise
// shapes:   dy: s (contiguous); da: a's shape; db: b's shape (contiguous grad buffers, read
//           through stride-0 broadcast strides so the += sums over broadcast axes)
template <Bin K, typename T, bool Fast = true>
void binary_backward(const Tensor& gy, const Tensor& a, const Tensor& b, const Tensor& ga, const Tensor& gb) {
  const Dims& s = gy.shape();
  const T* g = gy.data<T>();
  if constexpr (Fast && (K == Bin::add || K == Bin::sub)) {
    // Fast path (residual connections, bias adds): an operand of the output's full shape takes
    // dy as it is, no broadcast bookkeeping per element.
    const std::int64_t n = gy.numel();
    auto direct = [&](const Tensor& gx, T sign) {
      if (!gx.defined() || !(gx.shape() == s)) return false;
      T* d = gx.data<T>();
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelElements)
      for (std::int64_t i = 0; i < n; ++i) d[i] += sign * g[i];
      return true;
    };
    const bool a_done = direct(ga, T(1));
    const bool b_done = direct(gb, K == Bin::add ? T(1) : T(-1));
    if ((a_done || !ga.defined()) && (b_done || !gb.defined())) return;
    binary_backward<K, T, false>(gy, a, b, a_done ? Tensor() : ga, b_done ? Tensor() : gb);
    return;
  }
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const std::array<Dims, 5> st{
      contiguous_strides(s), broadcast_strides(a.shape(), a.strides(), s),
      broadcast_strides(b.shape(), b.strides(), s),
      ga.defined() ? broadcast_strides(ga.shape(), ga.strides(), s) : Dims(),
      gb.defined() ? broadcast_strides(gb.shape(), gb.strides(), s) : Dims()};
  std::array<Dims, 5> st2 = st;
  if (!ga.defined()) st2[3] = st[0]; // unused, any valid strides
  if (!gb.defined()) st2[4] = st[0];
  T* pga = ga.defined() ? ga.data<T>() : nullptr;
  T* pgb = gb.defined() ? gb.data<T>() : nullptr;
  kernels::for_each_row<5>(s, st2, [&](const auto& o, std::int64_t m, const auto& in) {
    for (std::int64_t i = 0; i < m; ++i) {
      const T gi = g[o[0] + i];
      const T av = pa[o[1] + i * in[1]];
      const T bv = pb[o[2] + i * in[2]];
      if (pga) {
        T d;
        if constexpr (K == Bin::add || K == Bin::sub) d = gi;
        else if constexpr (K == Bin::mul) d = gi * bv;
        else d = gi / bv;
        pga[o[3] + i * in[3]] += d;
      }
      if (pgb) {
        T d;
        if constexpr (K == Bin::add) d = gi;
        else if constexpr (K == Bin::sub) d = -gi;
        else if constexpr (K == Bin::mul) d = gi * av;
        else d = -gi * av / (bv * bv);
        pgb[o[4] + i * in[4]] += d;
      }
    }
  });
}

template <Bin K> Tensor binary(const Tensor& a, const Tensor& b) {
  const char* name = bin_name(K);
  if (a.dtype() != b.dtype())
    throw std::invalid_argument(fmt::format("{}: dtypes differ: {} {} and {} {}", name, a.shape(),
                                            dtype_name(a.dtype()), b.shape(), dtype_name(b.dtype())));
  const Dims s = broadcast_shapes(a.shape(), b.shape(), name);
  ForwardTimer timer(name);
  Tensor out = new_tensor(s, a.dtype());
  dispatch_float(a.dtype(), name, [&]<typename T>() { binary_forward<K, T>(out, a, b); });
  return record(out, name, {a, b}, [](Node& n, const Tensor& gy) {
    if constexpr (K == Bin::add) {
      // A residual connection's add: one operand of the output's full shape takes dy's buffer
      // itself as its first gradient (no copy, no zero fill). b is served first and normally,
      // so when a and b are one tensor, a finds b's buffer and accumulates into it.
      if (n.needs_grad(0) && n.inputs[0]->shape == gy.shape() && !n.inputs[0]->grad) {
        Tensor gb = n.grad(1);
        dispatch_float(gy.dtype(), bin_name(K), [&]<typename T>() {
          binary_backward<K, T>(gy, n.input(0), n.input(1), Tensor(), gb);
        });
        if (n.adopt_grad(0, gy)) return;
        dispatch_float(gy.dtype(), bin_name(K), [&]<typename T>() {
          binary_backward<K, T>(gy, n.input(0), n.input(1), n.grad(0), Tensor());
        });
        return;
      }
    }
    dispatch_float(gy.dtype(), bin_name(K), [&]<typename T>() {
      binary_backward<K, T>(gy, n.input(0), n.input(1), n.grad(0), n.grad(1));
    });
  });
}

} // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary<Bin::add>(a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary<Bin::sub>(a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary<Bin::mul>(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary<Bin::div>(a, b); }

// y = alpha * x + beta, elementwise, for the scalar variants and neg.
static Tensor affine(const Tensor& x, double alpha, double beta, const char* name) {
  ForwardTimer timer(name);
  Tensor out = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    T* y = out.data<T>();
    if (x.is_contiguous()) {
      const T* px = x.data<T>();
      const std::int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= kernels::kParallelElements)
      for (std::int64_t j = 0; j < n; ++j) y[j] = al * px[j] + be;
      return;
    }
    std::int64_t i = 0;
    kernels::for_each_row2(x.shape(), out.strides(), x.strides(),
                           [&](std::int64_t, std::int64_t os, std::int64_t m, std::int64_t, std::int64_t sx) {
                             const T* px = x.data<T>() + os;
                             for (std::int64_t j = 0; j < m; ++j) y[i++] = al * px[j * sx] + be;
                           });
  });
  // forward:  y = alpha x + beta      local: dy/dx = alpha
  // VJP:      dx += alpha dy          shapes: x, y, dy, dx all the same
  return record(out, name, {x}, [alpha, name](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    dispatch_float(gx.dtype(), name, [&]<typename T>() {
      const T al = static_cast<T>(alpha);
      T* d = gx.data<T>();
      const T* g = gy.data<T>();
      const std::int64_t m = gx.numel();
#pragma omp parallel for schedule(static) if (m >= kernels::kParallelElements)
      for (std::int64_t i = 0; i < m; ++i) d[i] += al * g[i];
    });
  });
}

Tensor neg(const Tensor& x) { return affine(x, -1.0, 0.0, "neg"); }
Tensor add_scalar(const Tensor& x, double s) { return affine(x, 1.0, s, "add_scalar"); }
Tensor mul_scalar(const Tensor& x, double s) { return affine(x, s, 0.0, "mul_scalar"); }
Tensor rsub_scalar(const Tensor& x, double s) { return affine(x, -1.0, s, "rsub_scalar"); }

Tensor rdiv_scalar(const Tensor& x, double s) {
  ForwardTimer timer("rdiv_scalar");
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "rdiv_scalar", [&]<typename T>() {
    const T* px = xc.data<T>();
    T* y = out.data<T>();
    for (std::int64_t i = 0, m = out.numel(); i < m; ++i) y[i] = static_cast<T>(s) / px[i];
  });
  // forward:  y = s / x        local: dy/dx = -s / x^2 = -y / x
  // VJP:      dx += -dy * y / x             shapes: all the same
  Tensor saved_y = out.detach();
  return record(out, "rdiv_scalar", {xc}, [saved_y](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    Tensor xv = n.input(0);
    dispatch_float(gx.dtype(), "rdiv_scalar", [&]<typename T>() {
      const T* px = xv.data<T>();
      const T* y = saved_y.data<T>();
      const T* g = gy.data<T>();
      T* d = gx.data<T>();
      for (std::int64_t i = 0, m = gx.numel(); i < m; ++i) d[i] -= g[i] * y[i] / px[i];
    });
  });
}

} // namespace headgrad::ops
