// Golden tests of the causal language model against the PyTorch reference
// (tests/reference/gpt_model.py, fixtures written by make_text_fixtures.py):
//   - one training step of a tiny GPT: logits, loss, every gradient, the gradient norm, and the
//     parameters after clipping and one AdamW step with nanoGPT's parameter groups;
//   - a checkpoint headgrad trained, loaded into the PyTorch model: the same validation windows
//     (PyTorch's port of headgrad's generator drew them) and the same validation loss.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <sstream>

#include "data/text.hpp"
#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/nn_ops.hpp"
#include "golden_compare.hpp"
#include "models/gpt.hpp"
#include "train/run/checkpoint.hpp"
#include "train/loop/evaluate.hpp"
#include "train/run/run_optimizer.hpp"
#include "train/loop/train_step.hpp"

using namespace headgrad;

namespace {

const std::string kStepPath = golden::fixture_path("gpt_train_step");

// The text run whose model shape the training-step fixture's metadata gives.
train::RunConfig fixture_run(const io::SafetensorsFile& f) {
  train::RunConfig run = train::RunConfig::text_defaults();
  golden::read_meta(f, {{"vocab", &run.vocab}, {"block_size", &run.context}, {"n_layer", &run.layers},
                        {"n_head", &run.heads}, {"n_embd", &run.d_model}, {"ffn", &run.ffn}});
  return run;
}

// A GPT of that shape holding the fixture's initial parameters (param.*).
std::unique_ptr<models::GPT> fixture_gpt(const io::SafetensorsFile& f, const train::RunConfig& run) {
  auto model = std::make_unique<models::GPT>(run.gpt_config(), 1);
  nn::NamedTensors initial;
  for (const auto& [name, p] : model->named_parameters()) initial.emplace_back(name, f.at("param." + name));
  io::restore_parameters(*model, initial, kStepPath);
  return model;
}

} // namespace

TEST_CASE("golden: one training step of the GPT against PyTorch") {
  const io::SafetensorsFile f = io::load_safetensors(kStepPath);
  golden::Report rep("gpt_train_step");
  train::RunConfig run = fixture_run(f);
  golden::read_meta(f, {{"lr", &run.lr}, {"weight_decay", &run.weight_decay}, {"beta2", &run.beta2},
                        {"clip", &run.clip}});
  REQUIRE(golden::meta_double(f, "beta1") == 0.9);    // optim::AdamOptions' default
  REQUIRE(golden::meta_double(f, "adam_eps") == 1e-8); // likewise
  REQUIRE(run.decay == "matrices");

  const std::unique_ptr<models::GPT> gpt = fixture_gpt(f, run);
  models::GPT& model = *gpt;
  const nn::NamedTensors params = model.named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  REQUIRE(names == golden::split_commas(f.metadata.at("param_names"))); // nanoGPT's state_dict, wte once (tied)

  // The forward and the gradients are compared with PyTorch's float64 run of the same parameters
  // (gpt_train_step_f64), so the difference is headgrad's float32 rounding alone: PyTorch's own
  // float32 logits sit up to 3.7e-6 from the exact ones (tests/reference/README.md). The logits
  // reach 4.2 and many are small differences of such terms, so their atol is scaled to that size
  // (golden::scaled_to): round-off of 3e-6 on a logit of 0.25 is float32's, whatever BLAS kernel
  // ran (1.2x the unscaled tolerance with OpenBLAS's SkylakeX kernel, 0.4x with its Haswell one).
  const io::SafetensorsFile f64 = io::load_safetensors(golden::fixture_path("gpt_train_step_f64"));
  const auto widened = [](const Tensor& t) { return t.to(DType::f64); };
  const Tensor &tokens = f.at("tokens"), &targets = f.at("targets");
  const Tensor logits = model.forward(tokens);
  rep.expect("logits", widened(logits), f64.at("logits"), golden::scaled_to(f64.at("logits")));
  const Tensor loss = ops::cross_entropy(logits, targets);
  rep.expect("loss", widened(loss), f64.at("loss"));
  loss.backward();
  for (const auto& [name, p] : params) rep.expect("grad." + name, widened(p.grad()), f64.at("grad." + name));

  // clipping and AdamW as the trainer does them (train_step: the same optimizer make_optimizer
  // builds for --task text). Float32 on both sides; the update tolerance is the default one
  // (optim::Adam computes in the parameter's dtype as torch.optim does; both clip the gradients
  // by the norm in float64 vs float32 first).
  std::vector<Tensor> list;
  for (const auto& [name, p] : params) list.push_back(p);
  const double norm = optim::clip_grad_norm(list, run.clip);
  rep.expect("grad_norm", Tensor::scalar(norm), f.at("grad_norm"));
  auto opt = train::make_optimizer(run, params);
  opt->set_lr(run.lr);
  opt->step();
  for (const auto& [name, p] : params) rep.expect("updated." + name, p, f.at("updated." + name));
  rep.summary();
  CHECK(static_cast<std::size_t>(rep.count()) == 3 + 2 * params.size());
  CHECK(rep.failed() == 0);

  // negative control: weight decay on every parameter (not nanoGPT's groups) moves the norms' gains
  {
    const std::unique_ptr<models::GPT> other = fixture_gpt(f, run);
    models::GPT& m2 = *other;
    ops::cross_entropy(m2.forward(tokens), targets).backward();
    std::vector<Tensor> l2;
    for (const auto& [name, p] : m2.named_parameters()) l2.push_back(p);
    (void)optim::clip_grad_norm(l2, run.clip);
    train::RunConfig all = run;
    all.decay = "all";
    auto wrong = train::make_optimizer(all, m2.named_parameters());
    wrong->set_lr(run.lr);
    wrong->step();
    const golden::Result r =
        golden::compare("updated.transformer.ln_f.weight", m2.transformer->ln_f->weight, f.at("updated.transformer.ln_f.weight"));
    CHECK_MESSAGE(!r.ok, "weight decay on the LayerNorm gains was not detected");
  }
}

TEST_CASE("golden: the GPT in float64 is PyTorch's float64 GPT to rounding") {
  // The same step as above with every parameter widened to float64 on both sides: what is left is
  // float64 rounding (~1e-16 relative) times the model's condition, so a tolerance of 1e-10 still
  // catches any difference in the math that float32's round-off would hide (a GELU approximation,
  // a layer-norm epsilon in the wrong place, a missing scale).
  const io::SafetensorsFile f = io::load_safetensors(kStepPath);
  const io::SafetensorsFile f64 = io::load_safetensors(golden::fixture_path("gpt_train_step_f64"));
  golden::Report rep("gpt_train_step_f64");
  const std::unique_ptr<models::GPT> gpt = fixture_gpt(f, fixture_run(f));
  models::GPT& model = *gpt;
  model.to(DType::f64);
  const golden::Tolerance tight{1e-12, 1e-10, true};
  const Tensor logits = model.forward(f.at("tokens"));
  rep.expect("logits", logits, f64.at("logits"), tight);
  const Tensor loss = ops::cross_entropy(logits, f.at("targets"));
  rep.expect("loss", loss, f64.at("loss"), tight);
  loss.backward();
  for (const auto& [name, p] : model.named_parameters())
    rep.expect("grad." + name, p.grad(), f64.at("grad." + name), tight);
  rep.summary();
  CHECK(rep.failed() == 0);
}

TEST_CASE("golden: a headgrad checkpoint scores PyTorch's validation loss") {
  const io::SafetensorsFile ref = io::load_safetensors(golden::fixture_path("text_lm_eval"));
  const std::string text = std::string(HEADGRAD_SOURCE_DIR) + "/tests/reference/fixtures/text_lm.txt";
  train::LoadedRun run = train::load_model_checkpoint(golden::fixture_path("text_lm_model"));
  REQUIRE(run.config.is_text());
  const std::int64_t context = golden::meta_int(ref, "context"), count = golden::meta_int(ref, "count");
  REQUIRE(run.config.context == context);
  const data::TextCorpus corpus = data::load_text_corpus(text, data::TokenizerKind::chars, context);
  REQUIRE(corpus.tokenizer.size() == golden::meta_int(ref, "vocab"));
  // PyTorch's port of the generator drew the same windows
  CHECK(data::text_eval_offsets(corpus, context, count) == ref.at("offsets").to_int_vector());
  const train::EvalResult r = train::evaluate(*run.model, data::make_text_eval_set(corpus, context, count));
  const double want = ref.at("loss").item();
  CHECK(r.loss == doctest::Approx(want).epsilon(1e-5));
  CHECK(r.loss < std::log(static_cast<double>(corpus.tokenizer.size())) - 0.5); // it learned something
}
