// index.cpp - index_select, gather and embedding; their backwards scatter-add.
#include <cstring>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/scatter.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad::ops {
namespace {

void check_index(const Tensor& index, const char* op) {
  if (index.dtype() != DType::i64)
    throw std::invalid_argument(fmt::format("{}: index must be int64, got {} of shape {}", op,
                                            dtype_name(index.dtype()), index.shape()));
}

// Throws if any index is outside [0, n).
void check_range(const std::int64_t* idx, std::int64_t count, std::int64_t n, const char* op, const Dims& xshape) {
  for (std::int64_t i = 0; i < count; ++i)
    if (idx[i] < 0 || idx[i] >= n)
      throw std::invalid_argument(fmt::format("{}: index {} is out of range [0, {}) for a tensor of shape {}", op,
                                              idx[i], n, xshape));
}

} // namespace

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
  check_defined(x, "index_select", "x");
  check_defined(index, "index_select", "index");
  check_index(index, "index_select");
  if (index.dim() > 1)
    throw std::invalid_argument(fmt::format("index_select: index must be 1-D or 0-d, got shape {}", index.shape()));
  if (index.dim() == 0) return index_select(x, axis, reshape(index, {1})); // one index: the axis keeps size 1
  if (x.dim() == 0) { // PyTorch's 0-d x: axis 0, one index (0), a 0-d result
    wrap_axis(axis, 1, "index_select");
    if (index.numel() != 1)
      throw std::invalid_argument(fmt::format("index_select: a 0-d x takes one index, got shape {}", index.shape()));
    return reshape(index_select(reshape(x, {1}), 0, index), {});
  }
  axis = wrap_axis(axis, x.dim(), "index_select");
  OpTimer timer("index_select");
  Tensor xc = x.contiguous(), ic = index.contiguous();
  const std::int64_t len = x.shape()[axis], count = index.shape()[0];
  const std::int64_t* idx = ic.data<std::int64_t>();
  check_range(idx, count, len, "index_select", x.shape());
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape()[i];
  for (int i = axis + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  Dims oshape = x.shape();
  oshape[axis] = count;
  Tensor out = new_tensor(oshape, x.dtype());
  const std::size_t esz = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(xc.raw());
  char* dst = static_cast<char*>(out.raw());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < count; ++k)
      std::memcpy(dst + ((o * count + k) * inner) * esz, src + ((o * len + idx[k]) * inner) * esz,
                  static_cast<std::size_t>(inner) * esz);
  // forward:  y[o, k, i] = x[o, index[k], i]
  // local:    dy[o,k,i]/dx[o,j,i] = [index[k] == j]
  // VJP:      dx[o, index[k], i] += dy[o, k, i]   (scatter-add: a repeated index sums)
  // shapes:   x (outer, len, inner), index (count), y/dy (outer, count, inner)
  return record(out, "index_select", {xc, ic}, [outer, inner, len, count](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    if (!dx) return;
    const Tensor index = n.input(1);
    dispatch_float(dy.dtype(), "index_select", [&]<typename T>() {
      book::index_add<T>(dx.data<T>(), dx.first_write, dy.data<T>(), index.data<std::int64_t>(), outer, len, count,
                            inner);
    });
  });
}

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  check_defined(x, "gather", "x");
  check_defined(index, "gather", "index");
  check_index(index, "gather");
  axis = wrap_axis(axis, x.dim(), "gather");
  if (index.dim() != x.dim())
    throw std::invalid_argument(fmt::format("gather: index shape {} must have the rank of x {}", index.shape(), x.shape()));
  bool smaller = false;
  for (int i = 0; i < x.dim(); ++i) {
    if (i != axis && index.shape()[i] > x.shape()[i])
      throw std::invalid_argument(fmt::format("gather: index shape {} is larger than x shape {} off axis {}",
                                              index.shape(), x.shape(), axis));
    smaller = smaller || (i != axis && index.shape()[i] < x.shape()[i]);
  }
  if (smaller) { // PyTorch reads the leading part of those axes: gather from that view (its gradient is sliced back)
    Tensor part = x;
    for (int i = 0; i < x.dim(); ++i)
      if (i != axis) part = slice(part, i, 0, index.shape()[i]);
    return gather(part, axis, index);
  }
  OpTimer timer("gather");
  Tensor xc = x.contiguous(), ic = index.contiguous();
  const std::int64_t len = x.shape()[axis], count = index.shape()[axis];
  std::int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape()[i];
  for (int i = axis + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  const std::int64_t* idx = ic.data<std::int64_t>();
  check_range(idx, ic.numel(), len, "gather", x.shape());
  Tensor out = new_tensor(index.shape(), x.dtype());
  dispatch_float(x.dtype(), "gather", [&]<typename T>() {
    const T* px = xc.data<T>();
    T* y = out.data<T>();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t k = 0; k < count; ++k)
        for (std::int64_t i = 0; i < inner; ++i) {
          const std::int64_t at = (o * count + k) * inner + i;
          y[at] = px[(o * len + idx[at]) * inner + i];
        }
  });
  // forward:  y[o, k, i] = x[o, index[o, k, i], i]
  // VJP:      dx[o, index[o, k, i], i] += dy[o, k, i]
  // shapes:   x (outer, len, inner), index/y/dy (outer, count, inner)
  return record(out, "gather", {xc, ic}, [outer, inner, len, count](Node& n, const Tensor& dy) {
    const GradBuffer dx = n.grad_buffer(0);
    if (!dx) return;
    const Tensor index = n.input(1);
    dispatch_float(dy.dtype(), "gather", [&]<typename T>() {
      book::gather_add<T>(dx.data<T>(), dx.first_write, dy.data<T>(), index.data<std::int64_t>(), outer, len, count,
                             inner);
    });
  });
}

Tensor embedding(const Tensor& weight, const Tensor& tokens) {
  check_defined(weight, "embedding", "weight");
  check_defined(tokens, "embedding", "tokens");
  if (weight.dim() != 2)
    throw std::invalid_argument(fmt::format("embedding: weight must be (V, d), got {}", weight.shape()));
  check_index(tokens, "embedding");
  Tensor flat = reshape(tokens, {tokens.numel()});
  // Checked here too, so a bad token names embedding rather than the index_select inside it.
  check_range(flat.contiguous().data<std::int64_t>(), flat.numel(), weight.shape()[0], "embedding", weight.shape());
  Tensor rows = index_select(weight, 0, flat); // (N, d)
  Dims s = tokens.shape();
  s.push_back(weight.shape()[1]);
  return reshape(rows, s);
}

} // namespace headgrad::ops
