#include "framework/core/dims.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace headgrad {

std::string Dims::str() const { return fmt::format("[{}]", fmt::join(begin(), end(), ", ")); }

Dims contiguous_strides(const Dims& shape) {
  Dims s;
  s.resize(shape.size());
  std::int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

AxisLayout axis_layout(const Dims& shape, int axis) {
  AxisLayout l;
  for (int i = 0; i < shape.size(); ++i) {
    if (i < axis) l.outer *= shape[i];
    else if (i == axis) l.len = shape[i];
    else l.inner *= shape[i];
  }
  return l;
}

std::optional<Dims> view_strides(const Dims& shape, const Dims& strides, const Dims& new_shape) {
  Dims out;
  out.resize(new_shape.size());
  if (shape.numel() == 0 || shape.size() == 0) // nothing to keep in place (or one element)
    return contiguous_strides(new_shape);
  // Walk x's axes from the last, grouping them into runs that are contiguous among themselves
  // (stride[d - 1] = size[d] * stride[d], size-1 axes skipped); each run must be covered exactly
  // by a run of new axes, which get the run's strides.
  int view_d = new_shape.size() - 1;
  std::int64_t base = strides[shape.size() - 1], run_numel = 1, view_numel = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    run_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != run_numel * base)) { // the run ends at d
      while (view_d >= 0 && (view_numel < run_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * base;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != run_numel) return std::nullopt;
      if (d > 0) {
        base = strides[d - 1];
        run_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

int wrap_axis(int axis, int rank, const char* op) {
  const int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw std::invalid_argument(fmt::format("{}: axis {} is out of range for a tensor of rank {}", op, axis, rank));
  return a;
}

} // namespace headgrad
