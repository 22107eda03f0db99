// The decoder-only model (models/gpt.hpp): nanoGPT's state_dict names, its initialisation,
// causality, the fused and composed attention paths, and the key/value cache of generation
// (train/sample/kv_cache.hpp) against the full forward.
#include <doctest/doctest.h>

#include <cmath>

#include <string>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/engine/profiler.hpp"
#include "models/gpt.hpp"
#include "train/sample/kv_cache.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"

using namespace headgrad;
using namespace headgrad::models;
using test_support::check_close;
using test_support::contains;
using test_support::error_of;

namespace {

GPTConfig tiny_config() {
  return tiny::gpt({.vocab = 11, .d_model = 8, .heads = 2, .layers = 2, .ffn = 16}, /*block_size=*/8);
}

Tensor tokens_of(std::vector<std::int64_t> v, std::int64_t B) {
  const auto T = static_cast<std::int64_t>(v.size()) / B;
  return Tensor::from_ints(std::move(v), {B, T});
}

double std_of(const Tensor& t) {
  const auto v = t.to_vector();
  double s = 0, s2 = 0;
  for (double x : v) s += x, s2 += x * x;
  const double n = static_cast<double>(v.size());
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

} // namespace

TEST_CASE("GPT named_parameters: nanoGPT's state_dict names, order and shapes") {
  GPTConfig c = tiny_config();
  c.tie_weights = false;
  GPT untied(c, 0);
  std::vector<std::string> names;
  std::vector<Dims> shapes;
  for (const auto& [name, p] : untied.named_parameters()) names.push_back(name), shapes.push_back(p.shape());
  const std::vector<std::string> block = {"ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight", "ln_2.weight",
                                          "mlp.c_fc.weight", "mlp.c_proj.weight"};
  std::vector<std::string> want = {"transformer.wte.weight", "transformer.wpe.weight"};
  for (int i = 0; i < 2; ++i)
    for (const auto& b : block) want.push_back("transformer.h." + std::to_string(i) + "." + b);
  want.push_back("transformer.ln_f.weight");
  want.push_back("lm_head.weight");
  CHECK(names == want);
  CHECK(shapes[0] == Dims{11, 8});
  CHECK(shapes[1] == Dims{8, 8});
  CHECK(shapes[3] == Dims{24, 8}); // c_attn: q | k | v
  CHECK(shapes[6] == Dims{16, 8}); // c_fc
  CHECK(shapes.back() == Dims{11, 8});
  // tied: lm_head is wte (nanoGPT's state_dict lists both names for the one tensor)
  GPT tied(tiny_config(), 0);
  const auto tied_params = tied.named_parameters();
  CHECK(tied_params.size() == want.size() - 1);
  CHECK(tied_params.back().first == "transformer.ln_f.weight");
  CHECK(tied.lm_head_weight().same(tied.transformer->wte->weight));
}

TEST_CASE("GPT init: N(0, 0.02), residual projections scaled by 1/sqrt(2 layers), norms 1") {
  GPTConfig c = tiny_config();
  c.d_model = 64;
  c.ffn = 256;
  c.vocab = 100;
  c.layers = 4;
  GPT m(c, 3);
  CHECK(std_of(m.transformer->wte->weight) == doctest::Approx(0.02).epsilon(0.05));
  CHECK(std_of(m.transformer->h[0]->mlp->c_fc->weight) == doctest::Approx(0.02).epsilon(0.05));
  CHECK(std_of(m.transformer->h[1]->attn->c_proj->weight) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
  CHECK(std_of(m.transformer->h[1]->mlp->c_proj->weight) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
  CHECK(m.transformer->ln_f->weight.to_vector() == std::vector<double>(64, 1.0));
  CHECK_FALSE(m.transformer->ln_f->bias.defined()); // bias=False
  // the seed decides
  GPT same(c, 3), other(c, 4);
  CHECK(same.transformer->wte->weight.to_vector() == m.transformer->wte->weight.to_vector());
  CHECK(other.transformer->wte->weight.to_vector() != m.transformer->wte->weight.to_vector());
}

TEST_CASE("GPT is causal: a position's logits do not depend on later tokens") {
  GPT m(tiny_config(), 1, DType::f64);
  m.eval();
  NoGradGuard ng;
  const Tensor a = m.forward(tokens_of({1, 2, 3, 4, 5, 6}, 1)), b = m.forward(tokens_of({1, 2, 3, 9, 0, 10}, 1));
  const auto va = a.to_vector(), vb = b.to_vector();
  CHECK(std::equal(va.begin(), va.begin() + 3 * 11, vb.begin()));  // positions 0..2 the same
  CHECK_FALSE(std::equal(va.begin() + 3 * 11, va.end(), vb.begin() + 3 * 11));
  CHECK(a.shape() == Dims{1, 6, 11});
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)m.forward(tokens_of(std::vector<std::int64_t>(9, 1), 1)); }),
                 "block_size = 8"));
}

TEST_CASE("GPT fused and composed attention agree, values and gradients") {
  GPTConfig c = tiny_config();
  GPT fused(c, 2, DType::f64);
  c.attention = AttentionPath::composed;
  GPT composed(c, 2, DType::f64);
  const Tensor toks = tokens_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1}, 2), lens = Tensor::from_ints({6, 4}, {2});
  const Tensor lf = fused.forward(toks, lens), lc = composed.forward(toks, lens);
  check_close(lc, lf.to_vector(), 1e-12);
  ops::sum(lf * lf).backward();
  ops::sum(lc * lc).backward();
  check_close(test_support::gradients_of(composed), test_support::gradients_of(fused), 1e-12);
}

TEST_CASE("GPT with dropout: the fused op takes attention dropout, and equals composed from the same seed") {
  GPTConfig c = tiny_config();
  c.dropout = 0.3;
  GPT fused(c, 3, DType::f64);
  c.attention = AttentionPath::composed;
  GPT composed(c, 3, DType::f64);
  const Tensor toks = tokens_of({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1}, 2), lens = Tensor::from_ints({6, 4}, {2});
  profiler_reset();
  profiler_enable(true);
  const Tensor lf = fused.forward(toks, lens);
  profiler_enable(false);
  bool ran_fused = false, ran_masked_softmax = false;
  for (const OpProfile& r : profiler_report()) {
    ran_fused = ran_fused || (std::string(r.name) == "attention" && r.forward_calls == c.layers);
    ran_masked_softmax = ran_masked_softmax || (std::string(r.name) == "masked_softmax" && r.forward_calls > 0);
  }
  CHECK(ran_fused); // no silent fall back to the composed ops when dropout is on
  CHECK_FALSE(ran_masked_softmax);
  const Tensor lc = composed.forward(toks, lens);
  check_close(lc, lf.to_vector(), 1e-12);
  ops::sum(lf * lf).backward();
  ops::sum(lc * lc).backward();
  check_close(test_support::gradients_of(composed), test_support::gradients_of(fused), 1e-12);
  for (std::size_t l = 0; l < fused.transformer->h.size(); ++l)
    CHECK(fused.transformer->h[l]->attn->attn_dropout->gen.state() ==
          composed.transformer->h[l]->attn->attn_dropout->gen.state());
}

TEST_CASE("GPT attention weights for pictures: the same on both paths, kept only when asked on the fused one") {
  GPTConfig c = tiny_config();
  GPT fused(c, 4, DType::f64);
  c.attention = AttentionPath::composed;
  GPT composed(c, 4, DType::f64);
  const Tensor toks = tokens_of({1, 2, 3, 4, 5, 6}, 1);
  NoGradGuard ng;
  (void)fused.forward(toks);
  CHECK(contains(error_of<std::logic_error>([&] { (void)fused.attention_weights(); }), "GPT::attention_weights"));
  fused.keep_attention_weights(true);
  (void)fused.forward(toks);
  (void)composed.forward(toks); // the composed path has them anyway
  const auto wf = fused.attention_weights(), wc = composed.attention_weights();
  REQUIRE(wf.size() == 2);
  REQUIRE(wc.size() == 2);
  for (std::size_t l = 0; l < wf.size(); ++l) {
    CHECK(wf[l].shape() == Dims{1, 2, 6, 6});
    CHECK(wc[l].shape() == Dims{1, 2, 6, 6});
    check_close(wc[l], wf[l].to_vector(), 1e-14);
    const auto w = wf[l].to_vector();
    for (std::int64_t h = 0; h < 2; ++h) // causal: zero above the diagonal
      for (std::int64_t i = 0; i < 6; ++i)
        for (std::int64_t j = i + 1; j < 6; ++j) CHECK(w[static_cast<std::size_t>((h * 6 + i) * 6 + j)] == 0.0);
  }
}

TEST_CASE("GPT key/value cache: every position's logits equal the full forward's") {
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(dtype));
    GPT m(tiny_config(), 5, dtype);
    const std::vector<std::int64_t> seq = {3, 1, 4, 1, 5, 9, 2, 6}; // block_size tokens
    Tensor full;
    {
      NoGradGuard ng;
      m.eval();
      full = m.forward(tokens_of(seq, 1)); // (1, 8, 11)
      m.train();
    }
    KVCache cache = new_cache(m, 1);
    // a prompt of three positions in one call, then one position at a time
    std::vector<double> cached = forward_cached(m, tokens_of({3, 1, 4}, 1), cache).to_vector();
    CHECK(cache.length == 3);
    for (std::size_t t = 3; t < seq.size(); ++t) {
      const auto step = forward_cached(m, tokens_of({seq[t]}, 1), cache).to_vector();
      cached.insert(cached.end(), step.begin(), step.end());
    }
    CHECK(cache.length == 8);
    CHECK(m.training()); // forward_cached leaves the mode as it found it
    check_close(cached, full.to_vector(), dtype == DType::f64 ? 1e-12 : 1e-5);
    CHECK(contains(error_of<std::invalid_argument>([&] { (void)forward_cached(m, tokens_of({1}, 1), cache); }),
                   "8 cached + 1 new positions pass block_size 8"));
  }
}

TEST_CASE("GPT key/value cache: a batch of sequences") {
  GPT m(tiny_config(), 6, DType::f64);
  m.eval();
  NoGradGuard ng;
  const Tensor full = m.forward(tokens_of({1, 2, 3, 4, 7, 8, 9, 10}, 2));
  KVCache cache = new_cache(m, 2);
  const Tensor first = forward_cached(m, tokens_of({1, 2, 7, 8}, 2), cache);
  const Tensor rest = forward_cached(m, tokens_of({3, 4, 9, 10}, 2), cache);
  check_close(ops::concat({first, rest}, 1), full.to_vector(), 1e-12);
}

TEST_CASE("GPT dropout: masks in training, none in eval") {
  GPTConfig c = tiny_config();
  c.dropout = 0.3;
  GPT m(c, 7);
  const Tensor toks = tokens_of({1, 2, 3, 4}, 1);
  const auto a = m.forward(toks).to_vector(), b = m.forward(toks).to_vector();
  CHECK(a != b); // fresh masks each forward
  m.eval();
  CHECK(m.forward(toks).to_vector() == m.forward(toks).to_vector());
  // replicas draw masks of their own but build the same model
  auto r = m.replica(99);
  CHECK(r->named_parameters().size() == m.named_parameters().size());
}
