// masked_softmax.cpp - d2l's masked_softmax (valid_lens), the causal form, a boolean key mask and
// any AttentionMask. Each has its mask built by attention_mask.cpp ("which keys does row r keep")
// and calls the one kernel pair below (kernels::softmax_forward, softmax_backward); the backward
// is the plain softmax VJP, since masked entries have y = 0.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/ops/attention_mask.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::book {

// The formulas of softmax_rows, below, for (rows, cols) buffers. Row r keeps key j when j < lens[r]
// and keep[r * cols + j] != 0 (null: no limit). The forward subtracts m, the row's largest kept x,
// which changes no y but keeps exp from overflowing. A row with nothing kept (or only -inf) is all
// 0; a NaN or +inf among its kept x makes all of it NaN, masked keys too (PyTorch's softmax after
// masked_fill(-inf)), so that a NaN reaches the loss.
inline bool kept(const std::int64_t* lens, const std::uint8_t* keep, std::int64_t r, std::int64_t j,
                 std::int64_t cols) {
  return (!lens || j < lens[r]) && (!keep || keep[r * cols + j] != 0);
}

template <typename T>
void softmax_forward(T* y, const T* x, const std::int64_t* lens, const std::uint8_t* keep, std::int64_t rows,
                     std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T m = -std::numeric_limits<T>::infinity();
    bool nan = false;
    for (std::int64_t j = 0; j < cols; ++j)
      if (kept(lens, keep, r, j, cols)) {
        m = std::max(m, xr[j]);
        nan = nan || xr[j] != xr[j];
      }
    if (nan) m = std::numeric_limits<T>::quiet_NaN();
    T sum = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      yr[j] = kept(lens, keep, r, j, cols) ? std::exp(xr[j] - m) : T(0);
      sum += yr[j];
    }
    const bool empty = m == -std::numeric_limits<T>::infinity();
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = empty ? T(0) : yr[j] / sum; // (masked: 0 / sum, NaN in a NaN row)
  }
}
HEADGRAD_BOOK_LOOP(softmax_forward);

// A masked key gets dx = 0 exactly, as PyTorch's masked_fill gives it, even where dy holds an inf or
// a NaN (the sum, over the whole row, carries those to the kept keys).
template <typename T>
void softmax_backward(T* dx, bool first_write, const T* dy, const T* y, const std::int64_t* lens,
                      const std::uint8_t* keep, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * cols;
    const T* gr = dy + r * cols;
    T dot = 0;
    for (std::int64_t i = 0; i < cols; ++i) dot += gr[i] * yr[i];
    for (std::int64_t k = 0; k < cols; ++k)
      store_grad(dx[r * cols + k], kept(lens, keep, r, k, cols) ? yr[k] * (gr[k] - dot) : T(0), first_write);
  }
}
HEADGRAD_BOOK_LOOP(softmax_backward);

} // namespace headgrad::book

namespace headgrad::ops {

// Runs the kernel with the mask per score row (kernels::softmax_forward) and records the backward,
// which keeps the mask.
Tensor softmax_rows(const Tensor& x, KeptRows mask, const char* name) {
  OpTimer timer(name);
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    kernels::softmax_forward<T>(out.data<T>(), xc.data<T>(), mask.lens.empty() ? nullptr : mask.lens.data(),
                                mask.keep.empty() ? nullptr : mask.keep.data(), rows, cols);
  });
  // forward: y_i = exp(x_i) / sum_{j kept} exp(x_j) for kept i, y_i = 0 for masked i
  // VJP:     dx_k += y_k (dy_k - sum_i dy_i y_i) for kept k; dx_k = 0 for masked k (y_k = 0, and
  //          the kernel keeps it 0 where dy or y hold a NaN), so an all-masked row gets no
  //          gradient at all (no NaN, no uniform row).
  // shapes:  x, y, dy, dx: (B, Tq, Tk) or (B, H, Tq, Tk) as (rows = B*H*Tq, cols = Tk)
  const Tensor y = out.detach();
  return record(out, name, {x},
                [y, rows, cols, name, lens = std::move(mask.lens), keep = std::move(mask.keep)](Node& n, const Tensor& dy) {
                  const GradBuffer dx = n.grad_buffer(0);
                  dispatch_float(dy.dtype(), name, [&]<typename T>() {
                    kernels::softmax_backward<T>(dx.data<T>(), dx.first_write, dy.data<T>(), y.data<T>(),
                                                 lens.empty() ? nullptr : lens.data(),
                                                 keep.empty() ? nullptr : keep.data(), rows, cols);
                  });
                });
}

Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens) {
  AttentionMask mask;
  mask.valid_lens = valid_lens;
  return masked_softmax(x, mask);
}

Tensor masked_softmax(const Tensor& x, const AttentionMask& mask) {
  check_defined(x, "masked_softmax", "x");
  if (!mask.valid_lens.defined() && !mask.causal && !mask.keep.defined()) return softmax(x);
  return softmax_rows(x, per_row(kept_keys(mask, score_dims(x, "masked_softmax"), "masked_softmax")), "masked_softmax");
}

Tensor causal_softmax(const Tensor& x) {
  check_defined(x, "causal_softmax", "x");
  AttentionMask mask;
  mask.causal = true;
  return softmax_rows(x, per_row(kept_keys(mask, any_rank_score_dims(x, "causal_softmax"), "causal_softmax")),
                      "causal_softmax");
}

Tensor masked_softmax_keep(const Tensor& x, const Tensor& keep) {
  check_defined(x, "masked_softmax_keep", "x");
  check_defined(keep, "masked_softmax_keep", "keep");
  AttentionMask mask;
  mask.keep = keep;
  return softmax_rows(x, per_row(kept_keys(mask, score_dims(x, "masked_softmax_keep"), "masked_softmax_keep")),
                      "masked_softmax_keep");
}

} // namespace headgrad::ops
