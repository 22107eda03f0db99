// shape_ops.cpp - views and copies: to_dtype, clone, reshape, view, permute, transpose, slice,
// concat. (expand, squeeze, unsqueeze, stack, split and chunk are in axes.cpp.)
// Their backwards move the gradient back to the input's layout; none changes a value.
#include <algorithm>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/strided.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {

// dst = src, converting the dtype; any layouts, same shape. No autograd.
static void copy_into(const Tensor& dst, const Tensor& src) {
  dispatch_any(dst.dtype(), [&]<typename D>() {
    dispatch_any(src.dtype(), [&]<typename S>() {
      book::copy_strided(dst.data<D>(), dst.strides(), src.data<S>(), src.strides(), src.shape());
    });
  });
}

// x (any layout) copied into a fresh contiguous tensor of dtype `d`. No autograd.
static Tensor copy_as(const Tensor& x, DType d) {
  Tensor out = new_tensor(x.shape(), d);
  copy_into(out, x);
  return out;
}

// A zero tensor of `shape` with g written into x[..., start::step, ...] along axis (slice's
// gradient: the positions the slice did not read get 0).
static Tensor scatter_to_zeros(const Tensor& g, const Dims& shape, int axis, std::int64_t start, std::int64_t step) {
  Tensor out = Tensor::zeros(shape, g.dtype());
  Dims strides = out.strides();
  strides[axis] *= step;
  copy_into(make_view(out, g.shape(), strides, start * out.strides()[axis]), g);
  return out;
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  check_defined(x, "to_dtype", "x");
  if (x.dtype() == dtype) return x;
  OpTimer timer("to_dtype");
  Tensor out = copy_as(x, dtype);
  if (!is_float(dtype) || !is_float(x.dtype())) return out; // integer results carry no gradient
  // forward: y = cast(x)
  // VJP:     dx += cast_back(dy)          shapes: x, y, dy: same
  return record(out, "to_dtype", {x}, [](Node& n, const Tensor& dy) {
    n.add_to_grad(0, copy_as(dy, n.inputs[0]->dtype));
  });
}

Tensor clone(const Tensor& x) {
  check_defined(x, "clone", "x");
  OpTimer timer("clone");
  Tensor out = copy_as(x, x.dtype());
  // forward: y = x (a contiguous copy)      VJP: dx += dy
  return record(out, "clone", {x}, [](Node& n, const Tensor& dy) { n.add_to_grad(0, dy); });
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

// forward: y = x read as another shape (same elements, same row-major order)
// VJP:     dx += dy viewed as x's shape      shapes: x (in), y/dy (out); dy is contiguous
static Tensor record_reshape(Tensor out, const char* name, const Tensor& x) {
  return record(out, name, {x}, [](Node& n, const Tensor& dy) {
    const Dims& xs = n.inputs[0]->shape;
    n.add_to_grad(0, make_view(dy, xs, contiguous_strides(xs), dy.impl()->offset)); // first time: dy itself
  });
}

Tensor reshape(const Tensor& x, const Dims& shape) {
  check_defined(x, "reshape", "x");
  const Dims s = infer_shape(x.shape(), shape, "reshape");
  // A contiguous input becomes a view; otherwise reshape copies first (like torch.reshape).
  Tensor base = x.is_contiguous() ? x.detach() : copy_as(x, x.dtype());
  return record_reshape(make_view(base, s, contiguous_strides(s), base.impl()->offset), "reshape", x);
}

Tensor view(const Tensor& x, const Dims& shape) {
  check_defined(x, "view", "x");
  const Dims s = infer_shape(x.shape(), shape, "view");
  const std::optional<Dims> strides = view_strides(x.shape(), x.strides(), s);
  if (!strides)
    throw std::invalid_argument(fmt::format("view: tensor of shape {} with strides {} cannot be viewed as {} without "
                                            "a copy; use reshape()", x.shape(), x.strides(), s));
  return record_reshape(make_view(x, s, *strides, x.impl()->offset), "view", x);
}

Tensor permute(const Tensor& x, const Dims& order) {
  check_defined(x, "permute", "x");
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
  // forward: y = x with its axes reordered: y's axis i is x's axis order[i] (a view, no copy)
  // VJP:     dx += dy with the axes put back (the inverse permutation, again a view of dy)
  // shapes:  x, dx: x's shape; y, dy: y's shape
  Dims inverse = order;
  for (int i = 0; i < r; ++i) inverse[wrap_axis(static_cast<int>(order[i]), r, "permute")] = i;
  return record(out, "permute", {x}, [inverse](Node& n, const Tensor& dy) { n.add_to_grad(0, dy.permute(inverse)); });
}

Tensor transpose(const Tensor& x, int a, int b) {
  check_defined(x, "transpose", "x");
  const int r = x.dim();
  a = wrap_axis(a, r, "transpose");
  b = wrap_axis(b, r, "transpose");
  Dims order;
  for (int i = 0; i < r; ++i) order.push_back(i);
  std::swap(order[a], order[b]);
  return permute(x, order);
}

Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop) {
  check_defined(x, "slice", "x");
  axis = wrap_axis(axis, x.dim(), "slice");
  const std::int64_t n = x.shape()[axis];
  if (start < 0 || stop > n || start > stop)
    throw std::invalid_argument(fmt::format("slice: range [{}, {}) is outside axis {} of size {} (shape {})", start,
                                            stop, axis, n, x.shape()));
  return slice(x, axis, start, stop, 1);
}

Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop, std::int64_t step) {
  check_defined(x, "slice", "x");
  axis = wrap_axis(axis, x.dim(), "slice");
  if (step <= 0)
    throw std::invalid_argument(fmt::format("slice: step {} must be positive (axis {} of shape {})", step, axis,
                                            x.shape()));
  // Python's rules: a negative bound counts from the end, then both are clamped to [0, n].
  const std::int64_t n = x.shape()[axis];
  auto bound = [n](std::int64_t v) { return v < 0 ? std::max<std::int64_t>(v, -n) + n : std::min(v, n); };
  start = bound(start);
  stop = bound(stop);
  Dims shape = x.shape(), strides = x.strides();
  shape[axis] = stop > start ? (stop - start + step - 1) / step : 0;
  strides[axis] *= step;
  Tensor out = make_view(x, shape, strides, x.impl()->offset + start * x.strides()[axis]);
  // forward: y = x[..., start:stop:step, ...] along axis (a view)
  // VJP:     dx[..., start:stop:step, ...] += dy; nothing elsewhere
  return record(out, "slice", {x}, [axis, start, step](Node& n, const Tensor& dy) {
    n.add_to_grad(0, scatter_to_zeros(dy, n.inputs[0]->shape, axis, start, step));
  });
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  for (const Tensor& t : xs) check_defined(t, "concat", "a tensor of xs");
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
  OpTimer timer("concat");
  Tensor out = new_tensor(shape, first.dtype());
  std::int64_t at = 0;
  for (const auto& t : xs) {
    copy_into(out.slice(axis, at, at + t.shape()[axis]), t);
    at += t.shape()[axis];
  }
  // forward: y = [x_0 | x_1 | ...] along axis
  // VJP:     dx_k += dy[..., offset_k : offset_k + n_k, ...]
  return record(out, "concat", xs, [axis](Node& n, const Tensor& dy) {
    std::int64_t at = 0;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const std::int64_t len = n.inputs[k]->shape[axis];
      n.add_to_grad(k, dy.slice(axis, at, at + len));
      at += len;
    }
  });
}

} // namespace headgrad::ops

namespace headgrad {

// Tensor's own conversions and views (tensor.hpp) are these ops.
Tensor Tensor::to(DType d) const { return ops::to_dtype(*this, d); }
Tensor Tensor::contiguous() const {
  checked("Tensor::contiguous");
  return is_contiguous() ? *this : ops::clone(*this);
}
Tensor Tensor::clone() const { return ops::clone(*this); }
Tensor Tensor::reshape(const Dims& s) const { return ops::reshape(*this, s); }
Tensor Tensor::view(const Dims& s) const { return ops::view(*this, s); }
Tensor Tensor::permute(const Dims& order) const { return ops::permute(*this, order); }
Tensor Tensor::transpose(int a, int b) const { return ops::transpose(*this, a, b); }
Tensor Tensor::slice(int axis, std::int64_t start, std::int64_t stop) const {
  return ops::slice(*this, axis, start, stop);
}

} // namespace headgrad
