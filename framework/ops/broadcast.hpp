// broadcast.hpp - NumPy broadcasting rules shared by the elementwise ops.
#pragma once
#include "framework/tensor.hpp"

namespace headgrad::ops {

// The broadcast shape of a and b; throws "<op>: shapes [..] and [..] cannot be broadcast".
Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op);
// Strides that read a tensor of shape `shape` with `strides` as if it had shape `out`
// (0 on broadcast axes).
Dims broadcast_strides(const Dims& shape, const Dims& strides, const Dims& out);

} // namespace headgrad::ops
