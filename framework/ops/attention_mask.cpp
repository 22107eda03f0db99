// attention_mask.cpp - see attention_mask.hpp: every attention mask is checked and built here.
#include "framework/ops/attention_mask.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <utility>

namespace headgrad::ops {
namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// The valid lengths (int64 (B) or (B, Tq), each >= 0) as one length per (b, q).
std::vector<std::int64_t> lens_of(const Tensor& vl, const ScoreDims& d, const char* op) {
  if (vl.dtype() != DType::i64)
    throw std::invalid_argument(fmt::format("{}: valid_lens must be int64, got {} of shape {}", op,
                                            dtype_name(vl.dtype()), vl.shape()));
  const bool per_batch = vl.dim() == 1 && vl.shape()[0] == d.B;
  const bool per_query = vl.dim() == 2 && vl.shape() == Dims{d.B, d.Tq};
  if (!per_batch && !per_query)
    throw std::invalid_argument(fmt::format("{}: valid_lens shape {} fits neither (batch) = [{}] nor (batch, queries) "
                                            "= [{}, {}] for {}",
                                            op, vl.shape(), d.B, d.B, d.Tq, d.what));
  const std::vector<std::int64_t> v = vl.to_int_vector();
  for (std::size_t i = 0; i < v.size(); ++i) // a length above Tk keeps every key (d2l's sequence_mask)
    if (v[i] < 0)
      throw std::invalid_argument(fmt::format("{}: valid_lens[{}] = {} is negative ({})", op, i, v[i], d.what));
  if (per_query) return v;
  std::vector<std::int64_t> lens(at(d.B * d.Tq));
  for (std::int64_t b = 0; b < d.B; ++b) std::fill_n(lens.begin() + b * d.Tq, d.Tq, v[at(b)]);
  return lens;
}

// The keep flags (bool (B, Tk), (B, Tq, Tk) or, with a heads axis, (B, H, Tq, Tk)): per (b, q, j),
// or per (b, h, q, j) for the last form (then per_head is set).
std::vector<std::uint8_t> flags_of(const Tensor& kp, const ScoreDims& d, bool& per_head, const char* op) {
  if (kp.dtype() != DType::bool8)
    throw std::invalid_argument(fmt::format("{}: keep must be bool, got {} of shape {}", op, dtype_name(kp.dtype()),
                                            kp.shape()));
  const bool per_batch = kp.shape() == Dims{d.B, d.Tk}, per_query = kp.shape() == Dims{d.B, d.Tq, d.Tk};
  per_head = d.heads_axis && kp.shape() == Dims{d.B, d.H, d.Tq, d.Tk};
  if (!per_batch && !per_query && !per_head)
    throw std::invalid_argument(fmt::format(
        "{}: keep shape {} fits none of (batch, keys) = [{}, {}], (batch, queries, keys) = [{}, {}, {}]{} for {}", op,
        kp.shape(), d.B, d.Tk, d.B, d.Tq, d.Tk,
        d.heads_axis ? fmt::format(", (batch, heads, queries, keys) = [{}, {}, {}, {}]", d.B, d.H, d.Tq, d.Tk) : "",
        d.what));
  const Tensor kc = kp.contiguous();
  const std::uint8_t* src = kc.data<std::uint8_t>(); // bool8: one byte per element, nonzero = true
  std::vector<std::uint8_t> flags(at(per_batch ? d.B * d.Tq * d.Tk : kc.numel()));
  if (!per_batch) {
    for (std::size_t i = 0; i < flags.size(); ++i) flags[i] = src[i] != 0;
    return flags;
  }
  for (std::int64_t b = 0; b < d.B; ++b) // every query of row b keeps row b's keys
    for (std::int64_t q = 0; q < d.Tq; ++q)
      for (std::int64_t j = 0; j < d.Tk; ++j) flags[at((b * d.Tq + q) * d.Tk + j)] = src[b * d.Tk + j] != 0;
  return flags;
}

} // namespace

ScoreDims score_dims(const Tensor& x, const char* op) {
  const std::string what = fmt::format("scores of shape {}", x.shape());
  if (x.dim() == 3) return {x.shape()[0], 1, x.shape()[1], x.shape()[2], false, what};
  if (x.dim() == 4) return {x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], true, what};
  throw std::invalid_argument(fmt::format("{}: X must be (batch, queries, keys) or (batch, heads, queries, keys), "
                                          "got {}", op, x.shape()));
}

ScoreDims any_rank_score_dims(const Tensor& x, const char* op) {
  if (x.dim() < 2)
    throw std::invalid_argument(fmt::format("{}: X must be (..., queries, keys), got {}", op, x.shape()));
  std::int64_t B = 1;
  for (int a = 0; a + 2 < x.dim(); ++a) B *= x.shape()[a];
  return {B, 1, x.shape()[x.dim() - 2], x.shape().back(), false, fmt::format("scores of shape {}", x.shape())};
}

KeptKeys kept_keys(const AttentionMask& mask, const ScoreDims& d, const char* op) {
  KeptKeys k;
  k.dims = d;
  if (mask.valid_lens.defined()) k.lens = lens_of(mask.valid_lens, d, op);
  else if (mask.causal) k.lens.assign(at(d.B * d.Tq), d.Tk);
  if (mask.causal) // query q sees keys j <= q
    for (std::int64_t b = 0; b < d.B; ++b)
      for (std::int64_t q = 0; q < d.Tq; ++q) {
        std::int64_t& len = k.lens[at(b * d.Tq + q)];
        len = std::min(len, q + 1);
      }
  if (mask.keep.defined()) k.keep = flags_of(mask.keep, d, k.per_head, op);
  return k;
}

kernels::KeptKeys KeptKeys::heads_view() const {
  return {lens.empty() ? nullptr : lens.data(), keep.empty() ? nullptr : keep.data(), per_head};
}

KeptRows per_row(KeptKeys k) {
  const ScoreDims& d = k.dims;
  KeptRows r;
  if (d.H == 1) {
    r.lens = std::move(k.lens);
    r.keep = std::move(k.keep);
    return r;
  }
  const std::int64_t TqTk = d.Tq * d.Tk;
  if (!k.lens.empty()) {
    r.lens.resize(at(d.B * d.H * d.Tq));
    for (std::int64_t b = 0; b < d.B; ++b)
      for (std::int64_t h = 0; h < d.H; ++h) // row (b, h, q) keeps its batch row's length for query q
        std::copy_n(k.lens.begin() + b * d.Tq, d.Tq, r.lens.begin() + (b * d.H + h) * d.Tq);
  }
  if (k.per_head) {
    r.keep = std::move(k.keep);
  } else if (!k.keep.empty()) {
    r.keep.resize(at(d.B * d.H * TqTk));
    for (std::int64_t b = 0; b < d.B; ++b)
      for (std::int64_t h = 0; h < d.H; ++h)
        std::copy_n(k.keep.begin() + b * TqTk, TqTk, r.keep.begin() + (b * d.H + h) * TqTk);
  }
  return r;
}

AttentionMask repeat_per_head(const AttentionMask& mask, std::int64_t B, std::int64_t heads, std::int64_t Tq,
                              std::int64_t Tk, const char* op) {
  if (B < 0 || heads < 1 || Tq < 0 || Tk < 0)
    throw std::invalid_argument(fmt::format("{}: scores (batch, heads, queries, keys) = ({}, {}, {}, {}) need "
                                            "heads >= 1 and no negative size",
                                            op, B, heads, Tq, Tk));
  const ScoreDims d{B, heads, Tq, Tk, true, fmt::format("scores of shape {}", Dims{B, heads, Tq, Tk})};
  KeptRows rows = per_row(kept_keys(mask, d, op));
  AttentionMask out; // causal is in the lengths now
  if (!rows.lens.empty()) out.valid_lens = Tensor::from_ints(rows.lens, {B * heads, Tq});
  if (!rows.keep.empty()) {
    out.keep = new_tensor({B * heads, Tq, Tk}, DType::bool8, op);
    std::copy(rows.keep.begin(), rows.keep.end(), out.keep.data<std::uint8_t>());
  }
  return out;
}

} // namespace headgrad::ops
