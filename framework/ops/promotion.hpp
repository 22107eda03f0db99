// promotion.hpp - which dtype a binary op computes in, when its operands' dtypes differ.
//
// PyTorch's rules (torch.result_type, https://pytorch.org/docs/stable/tensor_attributes.html#type-promotion-doc)
// for our four dtypes: the order is bool < int64 < float32 < float64, and a 0-d operand decides
// only when its category (bool, integer, float) is higher than every dimensioned operand's.
// Comparisons follow them exactly. Arithmetic (add, sub, mul, div, pow, where) follows them for
// an integer or bool operand next to a float one - it computes in the float dtype, and the
// integer operand gets no gradient - and for float32 next to float64 when one is 0-d and the
// other is not (the dimensioned operand's dtype: a float64 0-d scalar does not turn float32 work
// into float64, in PyTorch either). It refuses the two cases PyTorch would promote:
//   float32 with float64, both 0-d or both dimensioned   a silent float64 result would hide a
//                          mixed-precision slip (the gradient check runs float64, training
//                          float32); convert explicitly;
//   int64/bool with int64/bool  integer arithmetic is not implemented (no op here needs it).
#pragma once
#include <utility>

#include "framework/core/tensor.hpp"

namespace headgrad::ops {

// torch.result_type(a, b) over bool, int64, float32, float64.
DType result_type(const Tensor& a, const Tensor& b);

// a and b in the dtype an arithmetic op computes in (see above): unchanged when their dtypes
// agree, otherwise the integer operand converted to the float operand's dtype. Throws
// std::invalid_argument naming `op`, the shapes and the dtypes for the refused mixes.
std::pair<Tensor, Tensor> arithmetic_operands(const Tensor& a, const Tensor& b, const char* op);

} // namespace headgrad::ops
