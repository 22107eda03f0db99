// extrema.cpp - max and min along an axis (values, or values with their indices), argmax and
// argmin, topk. Each gradient goes to the selected positions only: dx[o, index, i] += dy[o, i].
//
// NaN, as PyTorch: a NaN is the max (and the min) of a row that holds one, at the index of its
// first NaN, and it gets the row's gradient; topk ranks NaN above every number. Ties go to the
// first index. The loops are kernels/arg_reduce.hpp.
#include <fmt/format.h>
#include <memory>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels/arg_reduce.hpp"
#include "framework/engine/kernels/scatter.hpp"
#include "framework/ops/compare.hpp"
#include "framework/ops/ops.hpp"
#include "framework/engine/profiler.hpp"

namespace headgrad::ops {
namespace {

// x's shape with `axis` set to `size` (keepdim) or dropped. A 0-d x stays 0-d (PyTorch reduces a
// scalar along axis 0 or -1 to itself).
Dims resized(const Dims& shape, int axis, std::int64_t size, bool keep) {
  Dims out;
  for (int i = 0; i < shape.size(); ++i)
    if (i != axis) out.push_back(shape[i]);
    else if (keep) out.push_back(size);
  return out;
}

// The axis of x to reduce, wrapped (a 0-d x counts as rank 1), and its (outer, len, inner) layout.
// An empty axis has no extreme value: PyTorch refuses it too.
AxisLayout checked_layout(const Tensor& x, int& axis, const char* name) {
  check_defined(x, name, "x");
  axis = wrap_axis(axis, std::max(x.dim(), 1), name);
  const AxisLayout l = x.dim() == 0 ? AxisLayout{} : axis_layout(x.shape(), axis);
  if (l.len == 0) throw std::invalid_argument(fmt::format("{}: axis {} of shape {} is empty", name, axis, x.shape()));
  return l;
}

// forward: y[o, j, i] = x[o, index[o, j, i], i]     (index from the kernel: the argmax, the top k)
// local:   dy[o,j,i]/dx[o,m,i] = [index[o, j, i] == m]
// VJP:     dx[o, index[o, j, i], i] += dy[o, j, i]    (gather_add: the rest of dx gets 0)
// shapes:  x (outer, len, inner); index, y, dy (outer, count, inner)
Tensor record_selection(Tensor values, const char* name, const Tensor& xc, const Tensor& index, const AxisLayout& l,
                        std::int64_t count) {
  return record(values, name, {xc}, [index, l, count, name](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    dispatch_float(dy.dtype(), name, [&]<typename T>() {
      kernels::gather_add<T>(dx.data<T>(), dx.first_write, dy.data<T>(), index.data<std::int64_t>(), l.outer, l.len,
                             count, l.inner);
    });
  });
}

template <bool Max> ValuesIndices extreme(const Tensor& x, int axis, bool keepdim, const char* name) {
  const AxisLayout l = checked_layout(x, axis, name);
  OpTimer timer(name);
  const Tensor xc = x.contiguous();
  Tensor values = new_tensor(resized(x.shape(), axis, 1, true), x.dtype());
  Tensor index = new_tensor(values.shape(), DType::i64);
  dispatch_any(x.dtype(), [&]<typename T>() {
    kernels::arg_reduce<Max, T>(values.data<T>(), index.data<std::int64_t>(), xc.data<T>(), l.outer, l.len, l.inner);
  });
  values = record_selection(values, name, xc, index, l, 1);
  if (keepdim) return {values, index};
  const Dims dropped = resized(x.shape(), axis, 1, false);
  return {reshape(values, dropped), index.reshape(dropped)};
}

template <bool Max> Tensor arg_extreme(const Tensor& x, int axis, bool keepdim, const char* name) {
  const AxisLayout l = checked_layout(x, axis, name);
  const Tensor xc = x.contiguous();
  Tensor index = new_tensor(resized(x.shape(), axis, 1, keepdim), DType::i64);
  dispatch_any(x.dtype(), [&]<typename T>() {
    kernels::arg_reduce<Max, T>(nullptr, index.data<std::int64_t>(), xc.data<T>(), l.outer, l.len, l.inner);
  });
  return index;
}

} // namespace

Tensor max(const Tensor& x, int axis, bool keepdim) { return extreme<true>(x, axis, keepdim, "max").values; }
Tensor min(const Tensor& x, int axis, bool keepdim) { return extreme<false>(x, axis, keepdim, "min").values; }
ValuesIndices max_with_indices(const Tensor& x, int axis, bool keepdim) {
  return extreme<true>(x, axis, keepdim, "max_with_indices");
}
ValuesIndices min_with_indices(const Tensor& x, int axis, bool keepdim) {
  return extreme<false>(x, axis, keepdim, "min_with_indices");
}

Tensor argmax(const Tensor& x, int axis, bool keepdim) { return arg_extreme<true>(x, axis, keepdim, "argmax"); }
Tensor argmin(const Tensor& x, int axis, bool keepdim) { return arg_extreme<false>(x, axis, keepdim, "argmin"); }
Tensor argmax(const Tensor& x) {
  check_defined(x, "argmax", "x");
  return arg_extreme<true>(x.reshape({-1}), 0, false, "argmax");
}
Tensor argmin(const Tensor& x) {
  check_defined(x, "argmin", "x");
  return arg_extreme<false>(x.reshape({-1}), 0, false, "argmin");
}

ValuesIndices topk(const Tensor& x, std::int64_t k, int axis, bool largest) {
  check_defined(x, "topk", "x");
  axis = wrap_axis(axis, std::max(x.dim(), 1), "topk");
  const AxisLayout l = x.dim() == 0 ? AxisLayout{} : axis_layout(x.shape(), axis);
  if (k < 0 || k > l.len)
    throw std::invalid_argument(fmt::format("topk: k = {} is outside [0, {}] for axis {} of shape {}", k, l.len, axis,
                                            x.shape()));
  OpTimer timer("topk");
  const Tensor xc = x.contiguous();
  if (x.dim() == 0) k = 1; // torch.topk of a 0-d tensor is the tensor itself, for k = 0 as for k = 1
  const Dims shape = x.dim() == 0 ? Dims{} : resized(x.shape(), axis, k, true);
  Tensor values = new_tensor(shape, x.dtype());
  Tensor index = new_tensor(shape, DType::i64);
  dispatch_any(x.dtype(), [&]<typename T>() {
    auto run = largest ? kernels::topk<true, T> : kernels::topk<false, T>;
    run(values.data<T>(), index.data<std::int64_t>(), xc.data<T>(), l.outer, l.len, l.inner, k);
  });
  return {record_selection(values, "topk", xc, index, l, k), index};
}

} // namespace headgrad::ops
