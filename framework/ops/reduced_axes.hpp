// reduced_axes.hpp - the shapes of a reduction over several axes, and the layout the reductions
// with a kernel of their own (var, std, logsumexp) read their input in. Internal to framework/ops.
#pragma once
#include <cstdint>

#include "framework/core/tensor.hpp"

namespace headgrad::ops {

struct ReducedAxes {
  Dims kept;              // x's shape with the reduced axes as size 1 (keepdim's shape)
  Dims dropped;           // x's shape without them
  Dims order;             // the kept axes, then the reduced ones (a permutation of x's axes)
  std::int64_t count = 1; // elements per output element: the product of the reduced sizes
};

// `axes` wrapped and checked (empty: every axis); throws std::invalid_argument naming `op` for an
// axis out of range or repeated.
ReducedAxes reduced_axes(const Dims& shape, const Dims& axes, const char* op);

// x's elements as (kept.numel(), count) rows, each row one output element's inputs: a permuted
// contiguous copy, or x itself when the reduced axes are already last and x is contiguous. No
// autograd: the caller records its own backward.
Tensor reduced_rows(const Tensor& x, const ReducedAxes& r);

} // namespace headgrad::ops
