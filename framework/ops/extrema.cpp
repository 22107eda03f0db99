// extrema.cpp - max and min along an axis (values, or values with their indices), argmax and
// argmin, topk. Each gradient goes to the selected positions only: dx[o, index, i] += dy[o, i].
//
// NaN, as PyTorch: a NaN is the max (and the min) of a row that holds one, at the index of its
// first NaN, and it gets the row's gradient; topk ranks NaN above every number. Ties go to the
// first index (what PyTorch's CPU kernels return). The axis is the middle one of an
// (outer, len, inner) layout.
#include <algorithm>
#include <fmt/format.h>
#include <numeric>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/compare.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/scatter.hpp"

namespace headgrad::book {

// true when v should replace the current best c (max: v > c; min: v < c), NaN winning over numbers.
template <bool Max, typename T> inline bool replaces(T v, T c) {
  if (c != c) return false; // the first NaN stays
  if (v != v) return true;
  return Max ? v > c : v < c;
}

// For every (o, i): value[o, i] = the max (Max) or min of x[o, :, i] and index[o, i] its position.
// x: (outer, len, inner) contiguous, len >= 1; value (nullable) and index: (outer, inner).
template <bool Max, typename T>
void arg_reduce(T* value, std::int64_t* index, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner) {
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < len; ++k)
        if (replaces<Max>(x[(o * len + k) * inner + i], x[(o * len + best) * inner + i])) best = k;
      index[o * inner + i] = best;
      if (value) value[o * inner + i] = x[(o * len + best) * inner + i];
    }
}

// The k largest (Largest) or smallest entries of every x[o, :, i], best first: value and index
// (outer, k, inner). Order: NaN first for largest (last, so never chosen before a number, for
// smallest), then by value, ties by the lower index. k <= len.
template <bool Largest, typename T>
void topk(T* value, std::int64_t* index, const T* x, std::int64_t outer, std::int64_t len, std::int64_t inner,
          std::int64_t k) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(len));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const T* col = x + o * len * inner + i; // col[j * inner] = x[o, j, i]
      auto before = [col, inner](std::int64_t a, std::int64_t b) {
        const T va = col[a * inner], vb = col[b * inner];
        const bool na = va != va, nb = vb != vb;
        if (na || nb) return na != nb ? (Largest ? na : nb) : a < b; // NaN ranks as the largest value
        if (va != vb) return Largest ? va > vb : va < vb;
        return a < b;
      };
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t at = (o * k + j) * inner + i;
        index[at] = order[static_cast<std::size_t>(j)];
        value[at] = col[index[at] * inner];
      }
    }
}
} // namespace headgrad::book

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
      book::gather_add<T>(dx.data<T>(), dx.first_write, dy.data<T>(), index.data<std::int64_t>(), l.outer, l.len,
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
    book::arg_reduce<Max, T>(values.data<T>(), index.data<std::int64_t>(), xc.data<T>(), l.outer, l.len, l.inner);
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
    book::arg_reduce<Max, T>(nullptr, index.data<std::int64_t>(), xc.data<T>(), l.outer, l.len, l.inner);
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
    auto run = largest ? book::topk<true, T> : book::topk<false, T>;
    run(values.data<T>(), index.data<std::int64_t>(), xc.data<T>(), l.outer, l.len, l.inner, k);
  });
  return {record_selection(values, "topk", xc, index, l, k), index};
}

} // namespace headgrad::ops
