// test_attention_mask.cpp - the one mask builder (framework/ops/attention_mask.cpp): every op that
// takes an attention mask - masked_softmax (both forms), causal_softmax, masked_softmax_keep,
// attention, self_attention, repeat_per_head, and MultiHeadAttention on both of its paths - accepts
// the same masks and refuses the same ones with the same message; masked_softmax with a whole
// AttentionMask equals its definition written out by plain loops; repeat_per_head is d2l's
// repeat_interleave for every part of the mask.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "models/attention.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace test_support; // randn, check_close, error_of, contains, starts_with

namespace {

constexpr std::int64_t B = 2, H = 2, Tq = 3, Tk = 5, dh = 2, C = H * dh;

Tensor bools(const Dims& shape, std::uint64_t seed) {
  Generator g(seed);
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (auto& x : v) x = g.uniform() < 0.6 ? 1 : 0;
  return Tensor::from(v, shape, DType::bool8);
}

ops::AttentionMask lens_mask(const Tensor& lens) {
  ops::AttentionMask m;
  m.valid_lens = lens;
  return m;
}
ops::AttentionMask keep_mask(const Tensor& keep) {
  ops::AttentionMask m;
  m.keep = keep;
  return m;
}

// Every way to hand a mask to the library, each for scores (B, H, Tq, Tk) = [2, 2, 3, 5].
std::vector<std::pair<std::string, std::function<void(const ops::AttentionMask&)>>> takers() {
  const Tensor q = randn({B, Tq, C}, 1), k = randn({B, Tk, C}, 2), x = randn({B, Tk, C}, 3);
  auto mha = [](models::AttentionPath path) { // what MultiHeadAttention and GPT's attention call
    return [path](const ops::AttentionMask& m) {
      nn::Dropout dropout(0.0);
      models::AttentionWeights weights;
      models::Projected p;
      p.q = randn({B, Tq, C}, 5);
      p.k = p.v = randn({B, Tk, C}, 6);
      (void)models::multi_head_attention(p, H, m, path, dropout, weights);
    };
  };
  return {
      {"masked_softmax", [](const ops::AttentionMask& m) { (void)ops::masked_softmax(randn({B, H, Tq, Tk}, 7), m); }},
      {"attention", [q, k](const ops::AttentionMask& m) { (void)ops::attention(q, k, k, H, m); }},
      {"repeat_per_head", [](const ops::AttentionMask& m) { (void)ops::repeat_per_head(m, B, H, Tq, Tk); }},
      {"attention", mha(models::AttentionPath::composed)},
      {"attention", mha(models::AttentionPath::fused)},
  };
}

} // namespace

TEST_CASE("attention masks: one set of errors, whichever op or path takes the mask") {
  struct Bad {
    ops::AttentionMask mask;
    std::string message; // after "op: ", up to the scores' shape
  };
  const std::vector<Bad> bad = {
      {lens_mask(Tensor::from({3, 2}, {2})), "valid_lens must be int64, got float32 of shape [2]"},
      {lens_mask(Tensor::from_ints({3, 2, 1}, {3})),
       "valid_lens shape [3] fits neither (batch) = [2] nor (batch, queries) = [2, 3] for scores of shape [2, 2, 3, 5]"},
      {lens_mask(Tensor::from_ints({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})),
       "valid_lens shape [2, 4] fits neither (batch) = [2] nor (batch, queries) = [2, 3] for scores of shape [2, 2, 3, 5]"},
      {lens_mask(Tensor::from_ints({3, -2}, {2})), "valid_lens[1] = -2 is negative (scores of shape [2, 2, 3, 5]"},
      {keep_mask(Tensor::ones({B, Tk})), "keep must be bool, got float32 of shape [2, 5]"},
      {keep_mask(bools({B, Tq}, 8)),
       "keep shape [2, 3] fits none of (batch, keys) = [2, 5], (batch, queries, keys) = [2, 3, 5], (batch, heads, "
       "queries, keys) = [2, 2, 3, 5] for scores of shape [2, 2, 3, 5]"},
      {keep_mask(bools({B, 3, Tq, Tk}, 9)), "keep shape [2, 3, 3, 5] fits none of"},
  };
  for (const Bad& b : bad) {
    INFO(b.message);
    for (const auto& [op, take] : takers()) {
      INFO(op);
      const std::string what = error_of<std::invalid_argument>([&] { take(b.mask); });
      CHECK(starts_with(what, op + ": " + b.message));
    }
  }
  // self_attention: the same words, with its name and its (B, heads, T, T) scores
  const std::string what = error_of<std::invalid_argument>(
      [] { (void)ops::self_attention(randn({B, Tk, 3 * C}, 10), H, lens_mask(Tensor::from_ints({3, 2, 1}, {3}))); });
  CHECK(starts_with(what, "self_attention: valid_lens shape [3] fits neither (batch) = [2] nor (batch, "
                                        "queries) = [2, 5] for scores of shape [2, 2, 5, 5] (qkv [2, 5, 12])"));
  // the softmax forms name themselves and 3-D scores (without a heads axis, no per-head keep)
  CHECK(error_of<std::invalid_argument>([] { (void)ops::masked_softmax_keep(randn({B, Tq, Tk}, 11), bools({B, 1, Tq, Tk}, 12)); }) ==
        "masked_softmax_keep: keep shape [2, 1, 3, 5] fits none of (batch, keys) = [2, 5], (batch, queries, keys) = "
        "[2, 3, 5] for scores of shape [2, 3, 5]");
  CHECK(contains(error_of<std::invalid_argument>([] { (void)ops::causal_softmax(randn({4}, 13)); }),
                 "causal_softmax: X must be (..., queries, keys), got [4]"));
}

TEST_CASE("masked_softmax with a whole AttentionMask = its definition by plain loops, every keep form") {
  const Tensor x = randn({B, H, Tq, Tk}, 20);
  const Tensor lens = Tensor::from_ints({4, 1, 0, 5, 2, 3}, {B, Tq});
  for (const Dims& keep_shape : {Dims{B, Tk}, Dims{B, Tq, Tk}, Dims{B, H, Tq, Tk}})
    for (bool causal : {false, true}) {
      CAPTURE(keep_shape);
      CAPTURE(causal);
      ops::AttentionMask m;
      m.valid_lens = lens;
      m.causal = causal;
      m.keep = bools(keep_shape, 21);
      const auto kv = m.keep.to_int_vector(), lv = lens.to_int_vector();
      std::vector<double> keep(static_cast<std::size_t>(x.numel()));
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t i = 0; i < Tq; ++i)
            for (std::int64_t j = 0; j < Tk; ++j) {
              const std::int64_t at = keep_shape.size() == 2   ? b * Tk + j
                                      : keep_shape.size() == 3 ? (b * Tq + i) * Tk + j
                                                               : ((b * H + h) * Tq + i) * Tk + j;
              const bool kept = j < lv[static_cast<std::size_t>(b * Tq + i)] && (!causal || j <= i) &&
                                kv[static_cast<std::size_t>(at)] != 0;
              keep[static_cast<std::size_t>(((b * H + h) * Tq + i) * Tk + j)] = kept;
            }
      const Tensor want = ops::masked_softmax_keep(x, Tensor::from(keep, x.shape(), DType::bool8));
      check_close(ops::masked_softmax(x, m), want.to_vector(), 1e-15);
    }
  // the single forms are the same op
  ops::AttentionMask causal;
  causal.causal = true;
  CHECK(ops::masked_softmax(x, causal).to_vector() == ops::causal_softmax(x).to_vector());
  CHECK(ops::masked_softmax(x, lens_mask(lens)).to_vector() == ops::masked_softmax(x, lens).to_vector());
  CHECK(ops::masked_softmax(x, ops::AttentionMask{}).to_vector() == ops::softmax(x).to_vector());
}

TEST_CASE("repeat_per_head: d2l's repeat_interleave for every part of the mask, causal in the lengths") {
  // valid_lens (B): each batch row's length for each of its heads' rows, every query
  const ops::AttentionMask l = ops::repeat_per_head(lens_mask(Tensor::from_ints({4, 7}, {B})), B, H, Tq, Tk);
  CHECK(l.valid_lens.shape() == Dims{B * H, Tq});
  CHECK(l.valid_lens.to_int_vector() == std::vector<std::int64_t>{4, 4, 4, 4, 4, 4, 7, 7, 7, 7, 7, 7});
  CHECK_FALSE(l.keep.defined());
  // causal with lengths: the smaller of the two per query
  ops::AttentionMask c = lens_mask(Tensor::from_ints({2, 5}, {B}));
  c.causal = true;
  const ops::AttentionMask cr = ops::repeat_per_head(c, B, H, Tq, Tk);
  CHECK_FALSE(cr.causal);
  CHECK(cr.valid_lens.to_int_vector() == std::vector<std::int64_t>{1, 2, 2, 1, 2, 2, 1, 2, 3, 1, 2, 3});
  // keep (B, Tk) -> every query of each head's row; a per-head keep is read in place
  const Tensor kb = bools({B, Tk}, 30), kh = bools({B, H, Tq, Tk}, 31);
  const auto kbr = ops::repeat_per_head(keep_mask(kb), B, H, Tq, Tk).keep;
  REQUIRE(kbr.shape() == Dims{B * H, Tq, Tk});
  const auto kbv = kb.to_int_vector(), kbrv = kbr.to_int_vector();
  for (std::int64_t r = 0; r < B * H; ++r)
    for (std::int64_t i = 0; i < Tq; ++i)
      for (std::int64_t j = 0; j < Tk; ++j)
        CHECK(kbrv[static_cast<std::size_t>((r * Tq + i) * Tk + j)] == kbv[static_cast<std::size_t>(r / H * Tk + j)]);
  CHECK(ops::repeat_per_head(keep_mask(kh), B, H, Tq, Tk).keep.to_int_vector() == kh.to_int_vector());
  // nothing to repeat: an empty mask
  const ops::AttentionMask none = ops::repeat_per_head({}, B, H, Tq, Tk);
  CHECK_FALSE(none.valid_lens.defined());
  CHECK_FALSE(none.keep.defined());
  CHECK(contains(error_of<std::invalid_argument>([] { (void)ops::repeat_per_head({}, B, 0, Tq, Tk); }),
                 "repeat_per_head: scores"));
}
