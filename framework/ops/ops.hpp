// ops.hpp - every differentiable op, as one function each. The forward and its backward live
// together in the .cpp named in the comment; the derivative index is framework/ops/DERIVATIVES.md.
// The ops with integer or bool results (comparisons, argmax, ...) are in compare.hpp, included at
// the end. (Drawing token indices, multinomial and sample_logits, is train/sample/sampling.hpp.)
//
// Semantics are PyTorch's (torch 1.13) unless a comment here says otherwise; the differences are
// listed in DERIVATIVES.md too, and tests/test_differential.cpp replays a few thousand PyTorch
// cases against these functions.
// Shape and dtype errors throw std::invalid_argument naming the op and the shapes; so does an
// undefined tensor (Tensor()) where the op needs one. tests/test_misuse.cpp holds every public op
// and Tensor method to that with undefined, empty, other-dtype, other-rank and strided arguments.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad::ops {

// ---- views and copies (shape_ops.cpp) -------------------------------------------------------
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor clone(const Tensor& x);
Tensor reshape(const Tensor& x, const Dims& shape); // a view when x is contiguous, else a copy
// torch.Tensor.view: never copies; works on any layout where strides for `shape` exist (runs of
// axes contiguous in memory split or merged), else throws.
Tensor view(const Tensor& x, const Dims& shape);
Tensor permute(const Tensor& x, const Dims& order);
Tensor transpose(const Tensor& x, int a, int b);
// [start, stop) along axis, a view. Strict: the range must lie inside the axis (else it throws).
Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop);
// x[..., start:stop:step, ...] along axis, a view, with Python's rules: a negative bound counts
// from the end, bounds outside the axis are clamped (an empty result is fine), step >= 1 (as
// PyTorch, which has no negative steps).
Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop, std::int64_t step);
Tensor concat(const std::vector<Tensor>& xs, int axis);

// ---- adding, removing, repeating and splitting axes (axes.cpp) --------------------------------
// torch.Tensor.expand: size-1 axes repeated and leading axes added, as a view (stride 0); -1 keeps
// an axis. The gradient sums over the repeats.
Tensor expand(const Tensor& x, const Dims& shape);
Tensor squeeze(const Tensor& x);           // drops every size-1 axis (a view)
Tensor squeeze(const Tensor& x, int axis); // drops `axis` if its size is 1, else returns x as it is
Tensor unsqueeze(const Tensor& x, int axis); // a size-1 axis at `axis` in [-(rank+1), rank]
Tensor stack(const std::vector<Tensor>& xs, int axis); // equal shapes, joined along a new axis
// Views of consecutive pieces along axis: pieces of `size` (the last one shorter), or of the
// given sizes (which must add up to the axis). An empty axis gives one empty piece (torch.split).
std::vector<Tensor> split(const Tensor& x, std::int64_t size, int axis = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis = 0);
// torch.chunk: pieces of ceil(n / chunks), so there may be fewer than `chunks` (n = 6, chunks = 4
// gives 3 pieces); an empty axis gives `chunks` empty pieces.
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int axis = 0);

// ---- elementwise, NumPy broadcasting (elementwise.cpp) ---------------------------------------
// Dtypes: an int64 or bool operand next to a float one is promoted to that float type and gets no
// gradient (PyTorch's promotion). Refused, with std::invalid_argument: float32 with float64
// (PyTorch would promote to float64; convert explicitly with to_dtype) and arithmetic with no
// float operand (see promotion.hpp).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// a^b elementwise; the gradient is 0 for a where b == 0 and for b where a == 0 and b >= 0
// (PyTorch's rules at those points).
Tensor pow(const Tensor& a, const Tensor& b);
// where(cond, a, b): a where the bool cond is true, else b; all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where the bool mask (broadcast to x's shape) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
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
Tensor relu(const Tensor& x); // gradient [x > 0], and dy passed on at NaN (as PyTorch)
// torch.nn.functional.gelu: x Phi(x) with the normal CDF through erf (approximate='none', PyTorch's
// default) or its tanh approximation (approximate='tanh', GPT-2's form).
enum class GeluApproximate { none, tanh };
Tensor gelu(const Tensor& x, GeluApproximate approximate = GeluApproximate::none);
Tensor abs(const Tensor& x);  // gradient sign(x): 0 at 0
Tensor sigmoid(const Tensor& x);
// min(max(x, min), max) with either bound optional (not both absent); max wins when min > max, NaN
// stays NaN. Gradient 1 inside [min, max], bounds included, else 0.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
// torch.nn.functional.hardtanh: clamp to [min_val, max_val] (min_val > max_val is refused), with
// gradient 1 strictly inside and 0 on the bounds (clamp's is 1 there).
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);

// ---- reductions (reduce.cpp) ----------------------------------------------------------------
// Empty `axes` reduces over every axis.
// sum of an int64 or bool tensor is int64 (a count for bool), with no gradient, as torch.sum.
Tensor sum(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
// Difference: a mean over an empty axis throws (PyTorch returns NaN); a kept empty axis is fine
// (mean(zeros(0, 3), {1}) is the empty (0) tensor).
Tensor mean(const Tensor& x, const Dims& axes = {}, bool keepdim = false);
// torch.var / torch.std: sum((x - mean)^2) / (N - correction), correction 1 being Bessel's
// (PyTorch's unbiased default). N - correction <= 0 gives inf or NaN, as PyTorch, and so does the
// gradient at N - correction = 0; a correction above N gives PyTorch's finite gradient
// 2 (x - mean) / (N - correction) for var (0 for std). An empty reduced axis throws, as mean.
Tensor var(const Tensor& x, const Dims& axes = {}, std::int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Dims& axes = {}, std::int64_t correction = 1, bool keepdim = false);
// Sums `x` down to `shape` over broadcast axes (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Dims& shape);

// ---- max, min, topk along an axis (extrema.cpp) ------------------------------------------------
// torch.max(x, dim) and friends: a NaN is both the max and the min of its row (the first NaN's
// index), ties go to the first index, and the gradient goes to that index only. Any dtype (only
// float ones carry a gradient); an empty axis throws.
struct ValuesIndices {
  Tensor values;  // x's dtype
  Tensor indices; // int64, the positions along the axis
};
Tensor max(const Tensor& x, int axis, bool keepdim = false); // values; grad to the first argmax
Tensor min(const Tensor& x, int axis, bool keepdim = false);
ValuesIndices max_with_indices(const Tensor& x, int axis, bool keepdim = false);
ValuesIndices min_with_indices(const Tensor& x, int axis, bool keepdim = false);
// torch.topk: the k largest (or smallest) along axis, best first (always sorted), ties to the
// lower index; NaN ranks above every number. The gradient goes to the selected positions.
ValuesIndices topk(const Tensor& x, std::int64_t k, int axis = -1, bool largest = true);

// ---- softmax family (softmax.cpp) -----------------------------------------------------------
// Difference: a row that is all -inf gives zeros and a zero gradient (PyTorch: NaN), the same
// convention as masked_softmax's empty rows. log_softmax gives NaN there, as PyTorch. A row
// holding a NaN or +inf is NaN throughout, as PyTorch. log_softmax is (x - max) - log sum
// exp(x - max), PyTorch's order, exact to rounding at large logits. A 0-d x is one row of one
// element (softmax 1, log_softmax 0, as PyTorch; axis 0 or -1).
Tensor softmax(const Tensor& x);     // over the last axis
Tensor log_softmax(const Tensor& x); // over the last axis
Tensor softmax(const Tensor& x, int axis);
Tensor log_softmax(const Tensor& x, int axis);
// torch.logsumexp over `axes` (all when empty): -inf for an all -inf row, +inf for a row with +inf.
Tensor logsumexp(const Tensor& x, const Dims& axes, bool keepdim = false);

// ---- matmul (matmul.cpp) --------------------------------------------------------------------
// torch.matmul semantics: 1-D operands are promoted; batch dims broadcast.
// scale * (a @ b) with the scale applied inside the gemm (BLAS alpha): no extra pass over the
// product, forward or backward.
Tensor matmul(const Tensor& a, const Tensor& b, double scale = 1.0);

// ---- indexing (index.cpp) -------------------------------------------------------------------
// out = x.index_select(axis, index): index is int64, 1-D of any length or 0-d (one index, as
// PyTorch: the axis keeps size 1). A 0-d x takes axis 0 or -1 and an index of one element (0),
// and gives a 0-d result; any other index of a 0-d x is refused (PyTorch reads past its one element).
Tensor index_select(const Tensor& x, int axis, const Tensor& index);
// out[..., i, ...] = x[..., index[..., i, ...], ...] along axis; index has x's rank and is no
// larger than x on the other axes (PyTorch's rule: out has index's shape).
Tensor gather(const Tensor& x, int axis, const Tensor& index);
// Rows of `weight (V, d)` picked by integer `tokens` of any shape: out (..., d).
Tensor embedding(const Tensor& weight, const Tensor& tokens);

} // namespace headgrad::ops

#include "framework/ops/compare.hpp" // comparisons, logical ops, argmax, argmin: no gradient

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
