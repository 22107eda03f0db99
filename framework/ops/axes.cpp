// axes.cpp - ops that add, remove, repeat or split axes: expand, squeeze, unsqueeze (views), stack,
// split and chunk (compositions of unsqueeze, concat and slice). torch's rules throughout.
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::ops {

Tensor expand(const Tensor& x, const Dims& shape) {
  check_defined(x, "expand", "x");
  const int r = shape.size(), lead = shape.size() - x.dim();
  if (lead < 0)
    throw std::invalid_argument(fmt::format("expand: shape {} has fewer axes than the input {}", shape, x.shape()));
  Dims out_shape, strides;
  for (int i = 0; i < r; ++i) {
    const std::int64_t have = i < lead ? 1 : x.shape()[i - lead];
    const std::int64_t want = shape[i] == -1 && i >= lead ? have : shape[i];
    if (want < 0 || (have != want && have != 1))
      throw std::invalid_argument(fmt::format("expand: the input {} cannot be expanded to {} (axis {}: {} -> {})",
                                              x.shape(), shape, i, have, shape[i]));
    out_shape.push_back(want);
    strides.push_back(i < lead || have != want ? 0 : x.strides()[i - lead]); // repeated: read one element again
  }
  Tensor out = make_view(x, out_shape, strides, x.impl()->offset);
  // forward: y = x read again along the new and the size-1 axes (stride 0, a view)
  // VJP:     dx += dy summed over those axes (add_to_grad sums over broadcast axes)
  return record(out, "expand", {x}, [](Node& n, const Tensor& dy) { n.add_to_grad(0, dy); });
}

// y = x with its axes changed to `shape`/`strides` by adding or removing size-1 axes (a view);
// the gradient is dy read in x's shape.
static Tensor size_one_view(const Tensor& x, const Dims& shape, const Dims& strides, const char* name) {
  Tensor out = make_view(x, shape, strides, x.impl()->offset);
  // forward: y = x with size-1 axes added or removed (the same elements in the same order)
  // VJP:     dx += dy read in x's shape
  return record(out, name, {x}, [](Node& n, const Tensor& dy) { n.add_to_grad(0, reshape(dy, n.inputs[0]->shape)); });
}

Tensor squeeze(const Tensor& x) {
  check_defined(x, "squeeze", "x");
  Dims shape, strides;
  for (int i = 0; i < x.dim(); ++i)
    if (x.shape()[i] != 1) {
      shape.push_back(x.shape()[i]);
      strides.push_back(x.strides()[i]);
    }
  return size_one_view(x, shape, strides, "squeeze");
}

Tensor squeeze(const Tensor& x, int axis) {
  check_defined(x, "squeeze", "x");
  axis = wrap_axis(axis, std::max(x.dim(), 1), "squeeze");
  if (x.dim() == 0 || x.shape()[axis] != 1) return size_one_view(x, x.shape(), x.strides(), "squeeze"); // as torch
  Dims shape, strides;
  for (int i = 0; i < x.dim(); ++i)
    if (i != axis) {
      shape.push_back(x.shape()[i]);
      strides.push_back(x.strides()[i]);
    }
  return size_one_view(x, shape, strides, "squeeze");
}

// An axis of the result of adding one axis to x: in [-(rank + 1), rank].
static int new_axis(int axis, const Dims& shape, const char* op) {
  const int r = shape.size();
  if (axis < -(r + 1) || axis > r)
    throw std::invalid_argument(fmt::format("{}: axis {} is outside [{}, {}] for a tensor of shape {}", op, axis,
                                            -(r + 1), r, shape));
  return axis < 0 ? axis + r + 1 : axis;
}

Tensor unsqueeze(const Tensor& x, int axis) {
  check_defined(x, "unsqueeze", "x");
  axis = new_axis(axis, x.shape(), "unsqueeze");
  Dims shape, strides;
  for (int i = 0; i <= x.dim(); ++i) {
    if (i == axis) {
      shape.push_back(1);
      strides.push_back(i < x.dim() ? x.strides()[i] * x.shape()[i] : 1); // any stride reads a size-1 axis
    }
    if (i < x.dim()) {
      shape.push_back(x.shape()[i]);
      strides.push_back(x.strides()[i]);
    }
  }
  return size_one_view(x, shape, strides, "unsqueeze");
}

Tensor stack(const std::vector<Tensor>& xs, int axis) {
  for (const Tensor& t : xs) check_defined(t, "stack", "a tensor of xs");
  if (xs.empty()) throw std::invalid_argument("stack: no tensors given");
  axis = new_axis(axis, xs[0].shape(), "stack");
  std::vector<Tensor> parts;
  for (const auto& t : xs) {
    if (!(t.shape() == xs[0].shape()))
      throw std::invalid_argument(fmt::format("stack: shapes {} and {} differ", xs[0].shape(), t.shape()));
    if (t.dtype() != xs[0].dtype())
      throw std::invalid_argument(fmt::format("stack: dtypes {} and {} differ (shape {})", dtype_name(xs[0].dtype()),
                                              dtype_name(t.dtype()), t.shape()));
    parts.push_back(unsqueeze(t, axis));
  }
  return concat(parts, axis); // y = [x_0 | x_1 | ...] along a new axis
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis) {
  check_defined(x, "split", "x");
  axis = wrap_axis(axis, x.dim(), "split");
  std::int64_t total = 0;
  for (auto s : sizes) {
    if (s < 0) throw std::invalid_argument(fmt::format("split: negative size in {}", Dims(sizes)));
    total += s;
  }
  if (total != x.shape()[axis])
    throw std::invalid_argument(fmt::format("split: sizes {} do not add up to axis {} of shape {}", Dims(sizes), axis,
                                            x.shape()));
  std::vector<Tensor> out;
  std::int64_t at = 0;
  for (auto s : sizes) {
    out.push_back(slice(x, axis, at, at + s));
    at += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, std::int64_t size, int axis) {
  check_defined(x, "split", "x");
  axis = wrap_axis(axis, x.dim(), "split");
  const std::int64_t n = x.shape()[axis];
  if (size <= 0 && !(size == 0 && n == 0))
    throw std::invalid_argument(fmt::format("split: size {} must be positive (axis {} of shape {})", size, axis,
                                            x.shape()));
  // torch.split: pieces of `size`, the last one shorter; an empty axis gives one empty piece
  std::vector<std::int64_t> sizes;
  for (std::int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, axis);
}

std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int axis) {
  check_defined(x, "chunk", "x");
  axis = wrap_axis(axis, x.dim(), "chunk");
  if (chunks <= 0)
    throw std::invalid_argument(fmt::format("chunk: chunks = {} must be positive (shape {})", chunks, x.shape()));
  // torch.chunk: pieces of ceil(n / chunks), so possibly fewer than `chunks`; an empty axis gives
  // `chunks` empty pieces
  const std::int64_t n = x.shape()[axis];
  if (n == 0) return split(x, std::vector<std::int64_t>(static_cast<std::size_t>(chunks), 0), axis);
  return split(x, (n + chunks - 1) / chunks, axis);
}

} // namespace headgrad::ops
