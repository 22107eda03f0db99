// Golden test of one full training step against PyTorch 1.13 (tests/reference/README.md,
// train_step.safetensors), once with each attention path: the reference SequenceModel loaded with the fixture's parameters, the
// positional table, the logits, the masked cross-entropy, all 27 parameter gradients and one Adam
// step, each reported llm.c-style (max abs / rel diff per tensor).
#include <doctest/doctest.h>

#include <cmath>
#include <fmt/format.h>
#include <sstream>
#include <string>
#include <vector>

#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/optim/optimizer.hpp"
#include "golden_compare.hpp"
#include "models/transformer.hpp"

using namespace headgrad;

namespace {

models::ModelConfig config_of(const io::SafetensorsFile& f) {
  models::ModelConfig cfg;
  golden::read_meta(f, {{"vocab", &cfg.vocab}, {"d_model", &cfg.d_model}, {"heads", &cfg.heads},
                        {"layers", &cfg.layers}, {"ffn", &cfg.ffn}, {"max_len", &cfg.max_len},
                        {"dropout", &cfg.dropout}});
  return cfg;
}

// "param.<name>" for every model parameter, under its own name (the prefix stripped).
nn::NamedTensors initial_params(const io::SafetensorsFile& f, const nn::NamedTensors& mine) {
  nn::NamedTensors values;
  for (const auto& [name, p] : mine) values.emplace_back(name, f.at("param." + name));
  return values;
}

std::int64_t count_prefixed(const io::SafetensorsFile& f, const std::string& prefix) {
  std::int64_t n = 0;
  for (const auto& [name, t] : f.tensors) n += name.rfind(prefix, 0) == 0;
  return n;
}

// True when every entry of row `row` of a 2-D tensor (or entry `row` of a 1-D one) is exactly 0.
bool row_is_zero(const Tensor& t, std::int64_t row) {
  const std::vector<double> v = t.to_vector();
  const std::int64_t width = t.dim() == 1 ? 1 : t.shape()[1];
  for (std::int64_t j = 0; j < width; ++j)
    if (v[static_cast<std::size_t>(row * width + j)] != 0.0) return false;
  return true;
}
bool column_is_zero(const Tensor& t, std::int64_t col) {
  const std::vector<double> v = t.to_vector();
  for (std::int64_t i = 0; i < t.shape()[0]; ++i)
    if (v[static_cast<std::size_t>(i * t.shape()[1] + col)] != 0.0) return false;
  return true;
}

} // namespace

TEST_CASE("golden: one training step of the reference SequenceModel against PyTorch") {
  const std::string path = golden::fixture_path("train_step");
  const io::SafetensorsFile f = io::load_safetensors(path);
  // Both attention paths: training's fused op and d2l's composed ops must each match PyTorch.
  models::AttentionPath attention = models::AttentionPath::fused;
  SUBCASE("fused attention") { attention = models::AttentionPath::fused; }
  SUBCASE("composed attention") { attention = models::AttentionPath::composed; }
  golden::Report rep(attention == models::AttentionPath::fused ? "train_step (fused attention)"
                                                               : "train_step (composed attention)");

  // ---- the model, with the fixture's config and initial parameters ---------------------------
  models::ModelConfig cfg = config_of(f);
  cfg.attention = attention;
  REQUIRE(cfg.vocab == 11);
  REQUIRE(cfg.d_model == 16);
  REQUIRE(golden::meta_double(f, "layernorm_eps") == 1e-5); // our LayerNorm's eps (transformer.cpp)
  const std::int64_t B = golden::meta_int(f, "batch"), T = golden::meta_int(f, "seq_len");
  models::SequenceModel model(cfg, /*seed=*/1, DType::f32); // the init is overwritten below
  const nn::NamedTensors params = model.named_parameters();
  const std::vector<std::string> expected_names = golden::split_commas(f.metadata.at("param_names"));
  REQUIRE(expected_names.size() == 27);
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  REQUIRE(names == expected_names); // same names, same order as the PyTorch state_dict
  REQUIRE(count_prefixed(f, "param.") == 27);
  REQUIRE(count_prefixed(f, "grad.") == 27);
  REQUIRE(count_prefixed(f, "updated.") == 27);
  io::restore_parameters(model, initial_params(f, params), path);

  const Tensor& tokens = f.at("tokens");
  const Tensor& valid_lens = f.at("valid_lens");
  const Tensor& targets = f.at("targets");
  REQUIRE(tokens.shape() == Dims{B, T});
  REQUIRE(valid_lens.to_int_vector() == std::vector<std::int64_t>{7, 4, 5});

  // ---- forward -----------------------------------------------------------------------------------
  rep.expect("pos_encoding (P[:T])", model.pos_encoding->P.slice(0, 0, T), f.at("pos_encoding"));
  Tensor logits = model.forward(tokens, valid_lens);
  rep.expect("logits", logits, f.at("logits"));
  Tensor loss = ops::cross_entropy(logits, targets, ops::sequence_mask(valid_lens, T));
  rep.expect("loss", loss, f.at("loss"));

  // ---- backward: d loss / d parameter --------------------------------------------------------
  loss.backward();
  for (const auto& [name, p] : params) rep.expect("grad." + name, p.grad(), f.at("grad." + name));

  // The structural zeros the README lists, in the fixture (so the exact-zero rule is exercised
  // on them) and in ours.
  const Tensor& emb_ref = f.at("grad.embedding.weight");
  const Tensor emb = model.embedding->weight.grad();
  for (std::int64_t row : {0, 3, 9}) {
    CHECK_MESSAGE(row_is_zero(emb_ref, row), "fixture grad.embedding.weight row " << row);
    CHECK_MESSAGE(row_is_zero(emb, row), "our grad.embedding.weight row " << row << " is not exactly 0");
  }
  const auto& ffn1 = model.blks.at(1)->ffn;
  for (std::int64_t unit : {5, 11, 27}) {
    CHECK(row_is_zero(f.at("grad.blks.1.ffn.dense1.weight"), unit));
    CHECK(row_is_zero(f.at("grad.blks.1.ffn.dense1.bias"), unit));
    CHECK(column_is_zero(f.at("grad.blks.1.ffn.dense2.weight"), unit));
    CHECK_MESSAGE(row_is_zero(ffn1->dense1->weight.grad(), unit), "dense1.weight row " << unit);
    CHECK_MESSAGE(row_is_zero(ffn1->dense1->bias.grad(), unit), "dense1.bias entry " << unit);
    CHECK_MESSAGE(column_is_zero(ffn1->dense2->weight.grad(), unit), "dense2.weight column " << unit);
  }

  // ---- one Adam step -----------------------------------------------------------------------------
  optim::AdamOptions opt;
  golden::read_meta(f, {{"lr", &opt.lr}, {"beta1", &opt.beta1}, {"beta2", &opt.beta2}, {"adam_eps", &opt.eps},
                        {"weight_decay", &opt.weight_decay}});
  opt.decoupled = false;
  optim::Adam adam(params, opt);
  adam.step();
  for (const auto& [name, p] : params) {
    rep.expect("updated." + name, p, f.at("updated." + name));
    // Where the fixture's gradient is exactly 0 the update is exactly 0: p' == p bit for bit.
    const std::vector<double> g = f.at("grad." + name).to_vector(), p0 = f.at("param." + name).to_vector(),
                              p1 = p.to_vector();
    std::int64_t unchanged = 0, moved = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (g[i] == 0.0) (p1[i] == p0[i] ? unchanged : moved) += 1;
    CHECK_MESSAGE(moved == 0, "updated." << name << ": " << moved << " entries with zero gradient moved");
  }
  rep.summary();
  CHECK(rep.count() == 3 + 27 + 27); // P, logits, loss; every gradient; every update
  CHECK(rep.failed() == 0);

  // ---- negative controls -------------------------------------------------------------------------
  // One entry of one weight moved by 1e-4 must show in the logits and the loss gradients.
  {
    models::SequenceModel bad(cfg, 1, DType::f32);
    nn::NamedTensors moved = initial_params(f, params);
    REQUIRE(moved[21].first == "blks.1.ffn.dense2.weight");
    moved[21].second = golden::perturbed(moved[21].second, 0, 1e-4);
    io::restore_parameters(bad, moved, path);
    Tensor bad_logits = bad.forward(tokens, valid_lens);
    rep.expect_mismatch("logits (blks.1.ffn.dense2.weight[0,0] += 1e-4)", bad_logits, f.at("logits"));
    ops::cross_entropy(bad_logits, targets, ops::sequence_mask(valid_lens, T)).backward();
    rep.expect_mismatch("grad.dense.weight (same perturbation)", bad.dense->weight.grad(), f.at("grad.dense.weight"));
  }
  // Adam with eps added before the division by sqrt(1 - beta2^t) (a classic slip) is the same as
  // eps / sqrt(1 - 0.999) = 3.2e-7 in the right formula. It changes |dp| = lr |g| / (|g| + eps)
  // noticeably only where |g| is small, so it must be caught somewhere among the 27 updates.
  {
    models::SequenceModel m2(cfg, 1, DType::f32);
    io::restore_parameters(m2, initial_params(f, params), path);
    ops::cross_entropy(m2.forward(tokens, valid_lens), targets, ops::sequence_mask(valid_lens, T)).backward();
    optim::AdamOptions wrong = opt;
    wrong.eps = opt.eps / std::sqrt(1.0 - opt.beta2);
    optim::Adam adam2(m2.named_parameters(), wrong);
    adam2.step();
    int caught = 0;
    for (const auto& [name, p] : m2.named_parameters()) {
      const golden::Result r = golden::compare("updated." + name, p, f.at("updated." + name));
      if (!r.ok) {
        ++caught;
        fmt::print("      (negative control, eps misplaced) {}\n", r.line);
      }
    }
    fmt::print("      (negative control, eps misplaced) caught in {} of 27 updates\n", caught);
    CHECK_MESSAGE(caught > 0, "Adam with eps misplaced was not detected by any updated.* comparison");
  }
}
