// broadcast.hpp - NumPy's broadcasting rules (https://numpy.org/doc/stable/user/basics.broadcasting.html),
// shared by the elementwise ops, matmul's batch dimensions and the gradient of a broadcast.
#pragma once
#include "framework/core/dims.hpp"

namespace headgrad {

// The broadcast shape of a and b; throws "<op>: shapes [..] and [..] cannot be broadcast".
Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op);
// Strides that read a tensor of shape `shape` with `strides` as if it had shape `out`
// (0 on broadcast axes).
Dims broadcast_strides(const Dims& shape, const Dims& strides, const Dims& out);

} // namespace headgrad
