// masked_softmax.cpp - d2l's masked_softmax (valid_lens), the causal form and a boolean key mask.
// All three reduce the mask to "which keys does row r keep" and call the one fused kernel pair in
// kernels/row_softmax.hpp; the backward is the plain softmax VJP, since masked entries have y = 0.
#include <fmt/format.h>
#include <vector>

#include "framework/autograd.hpp"
#include "framework/kernels/row_softmax.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/profiler.hpp"

namespace headgrad::ops {
namespace {

// Runs the kernel with per-row lengths and/or a per-element keep mask (empty: none) and records the
// backward, which keeps both.
Tensor softmax_rows(const Tensor& x, std::vector<std::int64_t> lens, std::vector<std::uint8_t> keep, const char* name) {
  OpTimer timer(name);
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const std::int64_t cols = x.shape().back();
  const std::int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  dispatch_float(x.dtype(), name, [&]<typename T>() {
    kernels::softmax_forward<T>(out.data<T>(), xc.data<T>(), lens.empty() ? nullptr : lens.data(),
                                keep.empty() ? nullptr : keep.data(), rows, cols);
  });
  // forward: y_i = exp(x_i) / sum_{j kept} exp(x_j) for kept i, y_i = 0 for masked i
  // VJP:     dx_k += y_k (dy_k - sum_i dy_i y_i) for kept k; dx_k = 0 for masked k (y_k = 0, and
  //          the kernel keeps it 0 where dy or y hold a NaN), so an all-masked row gets no
  //          gradient at all (no NaN, no uniform row).
  // shapes:  x, y, dy, dx: (B, Tq, Tk) or (B, H, Tq, Tk) as (rows = B*H*Tq, cols = Tk)
  const Tensor y = out.detach();
  return record(out, name, {x},
                [y, rows, cols, name, lens = std::move(lens), keep = std::move(keep)](Node& n, const Tensor& dy) {
                  const GradBuffer dx = n.grad_buffer(0);
                  dispatch_float(dy.dtype(), name, [&]<typename T>() {
                    kernels::softmax_backward<T>(dx.data<T>(), dx.first_write, dy.data<T>(), y.data<T>(),
                                                 lens.empty() ? nullptr : lens.data(),
                                                 keep.empty() ? nullptr : keep.data(), rows, cols);
                  });
                });
}

// Scores as (batch, heads, queries, keys): 3-D scores (batch, queries, keys) are one head.
struct ScoreDims {
  std::int64_t B, H, Tq, Tk;
};
ScoreDims score_dims(const Tensor& x, const char* op) {
  if (x.dim() == 3) return {x.shape()[0], 1, x.shape()[1], x.shape()[2]};
  if (x.dim() == 4) return {x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]};
  throw std::invalid_argument(fmt::format("{}: X must be (batch, queries, keys) or (batch, heads, queries, keys), "
                                          "got {}", op, x.shape()));
}

} // namespace

Tensor masked_softmax(const Tensor& x, const Tensor& valid_lens) {
  check_defined(x, "masked_softmax", "x");
  if (!valid_lens.defined()) return softmax(x);
  const ScoreDims d = score_dims(x, "masked_softmax");
  if (valid_lens.dtype() != DType::i64)
    throw std::invalid_argument(fmt::format("masked_softmax: valid_lens must be int64, got {} of shape {}",
                                            dtype_name(valid_lens.dtype()), valid_lens.shape()));
  const bool per_batch = valid_lens.dim() == 1 && valid_lens.shape()[0] == d.B;
  const bool per_query = valid_lens.dim() == 2 && valid_lens.shape()[0] == d.B && valid_lens.shape()[1] == d.Tq;
  if (!per_batch && !per_query)
    throw std::invalid_argument(fmt::format("masked_softmax: valid_lens shape {} fits neither (batch) = [{}] nor "
                                            "(batch, queries) = [{}, {}] for X of shape {}",
                                            valid_lens.shape(), d.B, d.B, d.Tq, x.shape()));
  const std::vector<std::int64_t> v = valid_lens.to_int_vector();
  for (std::size_t i = 0; i < v.size(); ++i) // a length above Tk keeps every key (d2l's sequence_mask)
    if (v[i] < 0)
      throw std::invalid_argument(fmt::format("masked_softmax: valid_lens[{}] = {} is negative (X shape {})", i, v[i],
                                              x.shape()));
  // row (b, h, q) keeps its batch row's (or query's) length, the same for every head
  std::vector<std::int64_t> lens(static_cast<std::size_t>(d.B * d.H * d.Tq));
  for (std::int64_t b = 0; b < d.B; ++b)
    for (std::int64_t h = 0; h < d.H; ++h)
      for (std::int64_t q = 0; q < d.Tq; ++q)
        lens[static_cast<std::size_t>((b * d.H + h) * d.Tq + q)] =
            v[static_cast<std::size_t>(per_batch ? b : b * d.Tq + q)];
  return softmax_rows(x, std::move(lens), {}, "masked_softmax");
}

Tensor causal_softmax(const Tensor& x) {
  check_defined(x, "causal_softmax", "x");
  if (x.dim() < 2)
    throw std::invalid_argument(fmt::format("causal_softmax: X must be (..., queries, keys), got {}", x.shape()));
  const std::int64_t Tq = x.shape()[x.dim() - 2], Tk = x.shape().back();
  const std::int64_t rows = Tk == 0 ? 0 : x.numel() / Tk;
  std::vector<std::int64_t> lens(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) lens[static_cast<std::size_t>(r)] = std::min(r % Tq + 1, Tk);
  return softmax_rows(x, std::move(lens), {}, "causal_softmax");
}

Tensor masked_softmax_keep(const Tensor& x, const Tensor& keep) {
  check_defined(x, "masked_softmax_keep", "x");
  check_defined(keep, "masked_softmax_keep", "keep");
  const ScoreDims d = score_dims(x, "masked_softmax_keep");
  if (keep.dtype() != DType::bool8)
    throw std::invalid_argument(fmt::format("masked_softmax_keep: keep must be bool, got {} of shape {}",
                                            dtype_name(keep.dtype()), keep.shape()));
  const bool per_batch = keep.shape() == Dims{d.B, d.Tk};
  const bool per_query = keep.shape() == Dims{d.B, d.Tq, d.Tk};
  const bool per_head = x.dim() == 4 && keep.shape() == x.shape();
  if (!per_batch && !per_query && !per_head)
    throw std::invalid_argument(fmt::format("masked_softmax_keep: keep shape {} fits neither (batch, keys) = [{}, {}], "
                                            "(batch, queries, keys) = [{}, {}, {}] nor X's shape {}",
                                            keep.shape(), d.B, d.Tk, d.B, d.Tq, d.Tk, x.shape()));
  const std::vector<std::int64_t> k = keep.to_int_vector();
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(x.numel()));
  for (std::int64_t b = 0; b < d.B; ++b)
    for (std::int64_t h = 0; h < d.H; ++h)
      for (std::int64_t q = 0; q < d.Tq; ++q)
        for (std::int64_t j = 0; j < d.Tk; ++j) {
          const std::int64_t from = per_batch  ? b * d.Tk + j
                                    : per_query ? (b * d.Tq + q) * d.Tk + j
                                                : ((b * d.H + h) * d.Tq + q) * d.Tk + j;
          mask[static_cast<std::size_t>(((b * d.H + h) * d.Tq + q) * d.Tk + j)] = k[static_cast<std::size_t>(from)] != 0;
        }
  return softmax_rows(x, {}, std::move(mask), "masked_softmax_keep");
}

} // namespace headgrad::ops
