// ops.hpp - every differentiable op, as one function each. The forward and its backward live
// together in the .cpp named in the comment; the derivative index is framework/ops/DERIVATIVES.md.
//
// Shape and dtype errors throw std::invalid_argument naming the op and the shapes.
#pragma once
#include <cstdint>
#include <optional>

#include "framework/tensor.hpp"

namespace headgrad::ops {

// ---- views and copies (shape_ops.cpp) -------------------------------------------------------
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor clone(const Tensor& x);
Tensor reshape(const Tensor& x, const Dims& shape);
Tensor permute(const Tensor& x, const Dims& order);
Tensor transpose(const Tensor& x, int a, int b);
Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop);
Tensor concat(const std::vector<Tensor>& xs, int axis);

// ---- elementwise, NumPy broadcasting (elementwise.cpp) ---------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor add_scalar(const Tensor& x, double s);
Tensor mul_scalar(const Tensor& x, double s);
Tensor rsub_scalar(const Tensor& x, double s); // s - x
Tensor rdiv_scalar(const Tensor& x, double s); // s / x

// ---- unary math (unary.cpp) -----------------------------------------------------------------
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double p);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x); // tanh approximation

// ---- reductions (reduce.cpp) ----------------------------------------------------------------
// Empty `axes` reduces over every axis.
Tensor sum(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, int axis, bool keepdim = false); // values; grad to the first argmax
// Sums `x` down to `shape` over broadcast axes (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Dims& shape);

// ---- softmax family (softmax.cpp) -----------------------------------------------------------
Tensor softmax(const Tensor& x);     // over the last axis
Tensor log_softmax(const Tensor& x); // over the last axis

// ---- matmul (matmul.cpp) --------------------------------------------------------------------
// torch.matmul semantics: 1-D operands are promoted; batch dims broadcast.
// scale * (a @ b) with the scale applied inside the gemm (BLAS alpha): no extra pass over the
// product, forward or backward.
Tensor matmul(const Tensor& a, const Tensor& b, double scale = 1.0);

// ---- indexing (index.cpp) -------------------------------------------------------------------
// out = x.index_select(axis, index): index is 1-D int64 of any length.
Tensor index_select(const Tensor& x, int axis, const Tensor& index);
// out[..., i, ...] = x[..., index[..., i, ...], ...] along axis; index has x's rank.
Tensor gather(const Tensor& x, int axis, const Tensor& index);
// Rows of `weight (V, d)` picked by integer `tokens` of any shape: out (..., d).
Tensor embedding(const Tensor& weight, const Tensor& tokens);

} // namespace headgrad::ops

namespace headgrad {
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator-(const Tensor& x) { return ops::neg(x); }
inline Tensor operator+(const Tensor& a, double s) { return ops::add_scalar(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return ops::add_scalar(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return ops::add_scalar(a, -s); }
inline Tensor operator-(double s, const Tensor& a) { return ops::rsub_scalar(a, s); }
inline Tensor operator*(const Tensor& a, double s) { return ops::mul_scalar(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return ops::mul_scalar(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return ops::mul_scalar(a, 1.0 / s); }
inline Tensor operator/(double s, const Tensor& a) { return ops::rdiv_scalar(a, s); }
} // namespace headgrad
