// compare.hpp - ops whose results are bool or int64 and so carry no gradient: comparisons,
// logical combinations of masks, argmax and argmin. (Every differentiable op is in ops.hpp, which
// includes this header.)
//
// Comparisons broadcast like the arithmetic ops and compute in the dtype torch.result_type picks
// (promotion.hpp): float32 against float64 compares in float64, int64 against float32 in float32.
// NaN compares unequal to everything, itself included (IEEE, as PyTorch). The scalar forms
// compare a float tensor with the scalar rounded to the tensor's dtype, as PyTorch does; an int64
// or bool tensor is compared with the scalar exactly, in double (PyTorch would round both to
// float32, which differs only for integers beyond 2^24).
// Shape errors throw std::invalid_argument naming the op and the shapes.
#pragma once
#include "framework/core/tensor.hpp"

namespace headgrad::ops {

// ---- comparisons: bool results (compare.cpp) --------------------------------------------------
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);

// ---- logical ops on masks: any dtype, nonzero is true; bool results (compare.cpp) -------------
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

// ---- argmax / argmin: int64 indices (extrema.cpp) --------------------------------------------
// The position of the max (min) along `axis`: the first one on ties, the first NaN if the row
// holds one (torch.argmax). Any dtype. An empty axis throws.
Tensor argmax(const Tensor& x, int axis, bool keepdim = false);
Tensor argmin(const Tensor& x, int axis, bool keepdim = false);
// Over all elements: the flat (row-major) index, as torch.argmax(x) without dim.
Tensor argmax(const Tensor& x);
Tensor argmin(const Tensor& x);

} // namespace headgrad::ops
