// shape_ops.cpp - views and copies: to_dtype, clone, reshape, permute, transpose, slice, concat.
// Their backwards move the gradient back to the input's layout; none changes a value.
#include <fmt/format.h>

#include "framework/autograd.hpp"
#include "framework/kernels/strided.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {

template <typename Fn> static void dispatch_all(DType d, Fn&& fn) {
  switch (d) {
  case DType::f32: fn.template operator()<float>(); break;
  case DType::f64: fn.template operator()<double>(); break;
  case DType::i64: fn.template operator()<std::int64_t>(); break;
  case DType::bool8: fn.template operator()<bool>(); break;
  }
}

// Copies x (any layout) into a fresh contiguous tensor of dtype `d`. No autograd.
static Tensor copy_as(const Tensor& x, DType d) {
  Tensor out = new_tensor(x.shape(), d);
  dispatch_all(d, [&]<typename D>() {
    dispatch_all(x.dtype(), [&]<typename S>() {
      kernels::copy_strided(out.data<D>(), x.data<S>(), x.shape(), x.strides());
    });
  });
  return out;
}

// Passes the contiguous gradient g (same element count as input 0) to input 0, converting dtype:
// into a fresh buffer with `=`, or accumulated into an existing one with `+=`.
static void pass_gradient(Node& n, const Tensor& g) {
  bool assign = false;
  Tensor gx = n.grad_for_write(0, assign);
  dispatch_float(gx.dtype(), "backward", [&]<typename D>() {
    dispatch_float(g.dtype(), "backward", [&]<typename S>() {
      D* d = gx.data<D>();
      const S* s = g.data<S>();
      const std::int64_t m = gx.numel();
      if (assign)
        for (std::int64_t i = 0; i < m; ++i) d[i] = static_cast<D>(s[i]);
      else
        for (std::int64_t i = 0; i < m; ++i) d[i] += static_cast<D>(s[i]);
    });
  });
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  ForwardTimer timer("to_dtype");
  Tensor out = copy_as(x, dtype);
  if (!is_float(dtype) || !is_float(x.dtype())) return out; // integer results carry no gradient
  // forward:  y = cast(x)
  // VJP:      dx += cast_back(dy)          shapes: x, y, dy: same
  return record(out, "to_dtype", {x}, [](Node& n, const Tensor& gy) { pass_gradient(n, gy); });
}

Tensor clone(const Tensor& x) {
  ForwardTimer timer("clone");
  Tensor out = copy_as(x, x.dtype());
  // forward:  y = x (a contiguous copy)      VJP: dx += dy
  return record(out, "clone", {x}, [](Node& n, const Tensor& gy) { pass_gradient(n, gy); });
}

// Resolves one -1 and checks the element count.
static Dims infer_shape(const Dims& from, const Dims& to, const char* op) {
  Dims s = to;
  int neg = -1;
  std::int64_t known = 1;
  for (int i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (neg >= 0) throw std::invalid_argument(fmt::format("{}: only one -1 allowed in shape {}", op, to));
      neg = i;
    } else if (s[i] < 0) {
      throw std::invalid_argument(fmt::format("{}: negative size in shape {}", op, to));
    } else {
      known *= s[i];
    }
  }
  if (neg >= 0) {
    if (known == 0 || from.numel() % known != 0)
      throw std::invalid_argument(fmt::format("{}: cannot reshape {} into {}", op, from, to));
    s[neg] = from.numel() / known;
  }
  if (s.numel() != from.numel())
    throw std::invalid_argument(fmt::format("{}: cannot reshape {} ({} elements) into {} ({} elements)", op, from,
                                            from.numel(), to, s.numel()));
  return s;
}

Tensor reshape(const Tensor& x, const Dims& shape) {
  const Dims s = infer_shape(x.shape(), shape, "reshape");
  // A contiguous input becomes a view; otherwise reshape copies first (like torch.reshape).
  Tensor base = x.is_contiguous() ? x.detach() : copy_as(x, x.dtype());
  Tensor out = make_view(base, s, contiguous_strides(s), base.impl()->offset);
  // forward:  y = x viewed as `s` (same elements, same order)
  // VJP:      dx += dy viewed as x's shape      shapes: x (in), y/dy (s)
  //           The first gradient x receives is dy's own buffer, viewed in x's shape: no copy.
  return record(out, "reshape", {x}, [](Node& n, const Tensor& gy) {
    if (n.adopt_grad(0, make_view(gy, n.inputs[0]->shape, contiguous_strides(n.inputs[0]->shape), gy.impl()->offset)))
      return;
    pass_gradient(n, gy);
  });
}

Tensor permute(const Tensor& x, const Dims& order) {
  const int r = x.dim();
  if (order.size() != r)
    throw std::invalid_argument(fmt::format("permute: order {} does not match a tensor of shape {}", order, x.shape()));
  bool used[kMaxDims] = {};
  Dims shape, strides;
  for (int i = 0; i < r; ++i) {
    const int a = wrap_axis(static_cast<int>(order[i]), r, "permute");
    if (used[a])
      throw std::invalid_argument(
          fmt::format("permute: order {} repeats axis {} (tensor of shape {})", order, a, x.shape()));
    used[a] = true;
    shape.push_back(x.shape()[a]);
    strides.push_back(x.strides()[a]);
  }
  Tensor out = make_view(x, shape, strides, x.impl()->offset);
  // forward:  y[i_order[0], ..] = x[i_0, ..]  (a strided view, no copy)
  // VJP:      dx = dy permuted back: dy is contiguous in y's order, so scatter it through the
  //           strides that y's axes have in a contiguous buffer of x's shape.
  // shapes:   dy: y's shape; dx: x's shape (contiguous)
  Dims ord = order;
  for (auto& o : ord) o = wrap_axis(static_cast<int>(o), r, "permute");
  return record(out, "permute", {x}, [ord](Node& n, const Tensor& gy) {
    bool assign = false;
    Tensor gx = n.grad_for_write(0, assign);
    // scatter: walk dy contiguously, writing through the stride each of y's axes has in dx
    // (measured faster than gathering into dx for attention's head permutes and K^T)
    const Dims xs = contiguous_strides(gx.shape());
    Dims through;
    for (int i = 0; i < ord.size(); ++i) through.push_back(xs[static_cast<int>(ord[i])]);
    dispatch_float(gx.dtype(), "permute", [&]<typename T>() {
      kernels::add_into_strided(gx.data<T>(), through, gy.data<T>(), gy.shape(), assign);
    });
  });
}

Tensor transpose(const Tensor& x, int a, int b) {
  const int r = x.dim();
  a = wrap_axis(a, r, "transpose");
  b = wrap_axis(b, r, "transpose");
  Dims order;
  for (int i = 0; i < r; ++i) order.push_back(i);
  std::swap(order[a], order[b]);
  return permute(x, order);
}

Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop) {
  axis = wrap_axis(axis, x.dim(), "slice");
  const std::int64_t n = x.shape()[axis];
  if (start < 0 || stop > n || start > stop)
    throw std::invalid_argument(fmt::format("slice: range [{}, {}) is outside axis {} of size {} (shape {})", start,
                                            stop, axis, n, x.shape()));
  Dims shape = x.shape();
  shape[axis] = stop - start;
  Tensor out = make_view(x, shape, x.strides(), x.impl()->offset + start * x.strides()[axis]);
  // forward:  y = x[..., start:stop, ...] along axis (a view)
  // VJP:      dx[..., start:stop, ...] += dy; zero elsewhere
  return record(out, "slice", {x}, [axis, start](Node& n, const Tensor& gy) {
    Tensor gx = n.grad(0);
    Tensor window = make_view(gx, gy.shape(), gx.strides(), start * gx.strides()[axis]);
    dispatch_float(gx.dtype(), "slice", [&]<typename T>() {
      kernels::add_into_strided(window.data<T>(), window.strides(), gy.data<T>(), gy.shape());
    });
  });
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw std::invalid_argument("concat: no tensors given");
  const Tensor& first = xs[0];
  axis = wrap_axis(axis, first.dim(), "concat");
  Dims shape = first.shape();
  shape[axis] = 0;
  for (const auto& t : xs) {
    bool ok = t.dim() == first.dim() && t.dtype() == first.dtype();
    for (int i = 0; ok && i < t.dim(); ++i) ok = i == axis || t.shape()[i] == first.shape()[i];
    if (!ok)
      throw std::invalid_argument(fmt::format("concat: shapes {} and {} ({} and {}) do not match off axis {}",
                                              first.shape(), t.shape(), dtype_name(first.dtype()),
                                              dtype_name(t.dtype()), axis));
    shape[axis] += t.shape()[axis];
  }
  Tensor out = new_tensor(shape, first.dtype());
  std::int64_t at = 0;
  for (const auto& t : xs) {
    Tensor window = make_view(out, t.shape(), out.strides(), at * out.strides()[axis]);
    dispatch_all(first.dtype(), [&]<typename T>() {
      kernels::for_each_row2(t.shape(), window.strides(), t.strides(),
                             [&](std::int64_t od, std::int64_t os, std::int64_t m, std::int64_t sd, std::int64_t ss) {
                               T* d = window.data<T>() + od;
                               const T* s = t.data<T>() + os;
                               for (std::int64_t i = 0; i < m; ++i) d[i * sd] = s[i * ss];
                             });
    });
    at += t.shape()[axis];
  }
  // forward:  y = [x_0 | x_1 | ...] along axis
  // VJP:      dx_k += dy[..., offset_k : offset_k + n_k, ...]
  return record(out, "concat", xs, [axis](Node& n, const Tensor& gy) {
    std::int64_t at = 0;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const std::int64_t len = n.inputs[k]->shape[axis];
      if (n.needs_grad(k)) {
        Tensor gx = n.grad(k);
        Tensor part = make_view(gy, gx.shape(), gy.strides(), at * gy.strides()[axis]);
        dispatch_float(gx.dtype(), "concat", [&]<typename T>() {
          kernels::add_from_strided(gx.data<T>(), part.data<T>(), gx.shape(), part.strides());
        });
      }
      at += len;
    }
  });
}

} // namespace headgrad::ops
