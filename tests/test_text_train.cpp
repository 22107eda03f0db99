// Training the causal language model (task text): a short run learns, its checkpoint carries the
// vocabulary and the text's fingerprint, and a resumed run - with dropout, on one thread or two,
// for the text task and a toy task alike - ends bit for bit where the uninterrupted run does.
#include <doctest/doctest.h>

#include "test_support.hpp"
#include "tiny_models.hpp"
#include "train/run/checkpoint.hpp"
#include "train/parallel/dropout_state.hpp"
#include "train/run/run_optimizer.hpp"
#include "train/run/task_data.hpp"
#include "train/loop/trainer.hpp"

using namespace headgrad;
using namespace headgrad::train;
using test_support::contains;
using test_support::error_of;

namespace {

using test_support::TempDir; // named after this file

// A small text with structure to learn: counting words, over and over.
std::string counting_text() {
  const char* words[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"};
  std::string s;
  for (int r = 0; r < 60; ++r)
    for (const char* w : words) s += std::string(w) + (r % 7 == 0 ? ".\n" : " ");
  return s;
}

TrainOptions tiny_text(const TempDir& dir, std::int64_t steps) {
  test_support::write_file(dir / "text.txt", counting_text());
  TrainOptions o = tiny::text_training(dir / "text.txt", steps, dir / "run", /*eval_count=*/50);
  o.run.min_lr = 1e-3;
  o.run.seed = 3;
  return o;
}

std::vector<double> parameters_of(const std::string& model_path) {
  std::vector<double> out;
  for (const auto& [name, p] : load_model_checkpoint(model_path).model->named_parameters()) {
    const auto v = p.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Trains `o` for all its steps, and again in two invocations (the second resuming the first's
// checkpoint at half way); both final models must be equal bit for bit. The schedule is constant:
// a cosine decay depends on run.steps, which the first half changes.
void check_exact_resume(TrainOptions o, const TempDir& dir) {
  o.run.schedule = "constant";
  const std::int64_t steps = o.run.steps;
  o.out_dir = dir / "whole";
  (void)train::train(o);
  TrainOptions first = o, rest = o;
  first.out_dir = rest.out_dir = dir / "halves";
  first.run.steps = steps / 2;
  (void)train::train(first);
  rest.resume = dir / "halves/model.safetensors";
  (void)train::train(rest);
  CHECK(parameters_of(dir / "halves/model.safetensors") == parameters_of(dir / "whole/model.safetensors"));
}

// check_exact_resume once on one thread, once on two.
void check_exact_resume_on_one_and_two_threads(TrainOptions o, const TempDir& dir) {
  o.threads = 1;
  SUBCASE("one thread") { check_exact_resume(o, dir); }
  SUBCASE("two threads") {
    o.threads = 2;
    check_exact_resume(o, dir);
  }
}

} // namespace

TEST_CASE("text training: a short run learns and its checkpoint names its text") {
  TempDir dir;
  TrainOptions o = tiny_text(dir, 150);
  o.eval_every = 50;
  const TrainSummary s = train::train(o);
  REQUIRE(s.losses.size() == 150);
  CHECK(s.losses.front() > 2.5); // ~ln(17): 17 characters
  CHECK(s.eval.loss < 1.2);      // counting is easy to learn
  CHECK(s.eval.token_acc > 0.6);
  LoadedRun run = load_model_checkpoint(s.checkpoint);
  CHECK(run.config.is_text());
  CHECK(run.config.vocab == 17); // the 14 letters of "one" .. "ten", space, '.', '\n'
  const data::Tokenizer t = checkpoint_tokenizer(run.config, run.metadata, s.checkpoint);
  CHECK(t.size() == 17);
  CHECK(t.decode(t.encode("seven eight")) == "seven eight");
  // the same evaluation from the loaded checkpoint
  const TaskData data(run.config);
  CHECK(evaluate(*run.model, data.eval_set(50)).loss == doctest::Approx(s.eval.loss).epsilon(1e-12));
}

TEST_CASE("text training: a resumed run refuses another text") {
  TempDir dir;
  TrainOptions o = tiny_text(dir, 6);
  (void)train::train(o);
  test_support::write_file(dir / "text.txt", counting_text() + "eleven ");
  TrainOptions r = o;
  r.run.steps = 8;
  r.resume = dir / "run/model.safetensors";
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)train::train(r); }), "was trained on another text"));
}

TEST_CASE("resume with dropout is exact: text task") {
  TempDir dir;
  TrainOptions o = tiny_text(dir, 12);
  o.run.dropout = 0.2;
  check_exact_resume_on_one_and_two_threads(o, dir);
}

TEST_CASE("resume with dropout is exact: toy task") {
  TrainOptions o;
  o.run = {.task = data::Task::copy, .steps = 12, .batch = 16, .d_model = 16, .heads = 2, .layers = 1, .ffn = 32,
           .max_len = 8, .min_len = 2, .vocab = 10, .dropout = 0.3, .seed = 2};
  o.eval_every = 0;
  o.eval_count = 20;
  o.quiet = true;
  // the attention weights' dropout too, on both paths (the fused op draws it itself); and the
  // resumed run computes as it is told (the path is not stored: it changes no parameter)
  for (const char* attention : {"composed", "fused"})
    for (int threads : {1, 2}) {
      CAPTURE(attention);
      CAPTURE(threads);
      o.run.attention = attention;
      o.threads = threads;
      TempDir run_dir;
      check_exact_resume(o, run_dir);
    }
}

TEST_CASE("a resumed run keeps its --attention: composed without dropout resumes exactly") {
  TempDir dir;
  TrainOptions o;
  // the resumed model used to run the fused op: equal up to rounding only (here, with 2 layers,
  // not bit for bit)
  o.run = {.task = data::Task::copy, .steps = 12, .batch = 16, .d_model = 16, .heads = 2, .layers = 2, .ffn = 32,
           .max_len = 8, .min_len = 2, .vocab = 10, .seed = 2, .attention = "composed"};
  o.eval_every = 0;
  o.eval_count = 20;
  o.threads = 1;
  o.quiet = true;
  check_exact_resume(o, dir);
}

TEST_CASE("dropout states: saved for every shard and restored") {
  TempDir dir;
  TrainOptions o = tiny_text(dir, 4);
  o.run.dropout = 0.1;
  o.threads = 2;
  (void)train::train(o);
  LoadedRun run = load_model_checkpoint(dir / "run/model.safetensors");
  auto opt = make_optimizer(run.config, run.model->named_parameters());
  const NamedTensors states = load_optimizer_state(dir / "run/model.safetensors", run.step, *opt);
  // per shard (2 threads: 2 shards): drop, and per block attn_dropout, resid_dropout, mlp.dropout
  CHECK(run.config.shards == 2);
  CHECK(states.size() == 2 * 4);
  bool has = false;
  for (const auto& [name, t] : states) {
    CHECK(is_dropout_state(name));
    CHECK(t.shape() == Dims{6});
    has = has || name == "rng.shard1.transformer.h.0.attn.resid_dropout";
  }
  CHECK(has);
  // a malformed entry is refused, naming it (also under the name of checkpoints written before
  // shards: a single process's worker 0 ran shard 0)
  ShardDropout shards(*run.model, run.config.seed, 2, {0, 2});
  NamedTensors bad = {{"rng.rank0.worker0.transformer.drop", Tensor::from_ints({1, 2}, {2})}};
  CHECK(contains(error_of<std::invalid_argument>([&] { shards.restore(bad, "F"); }),
                 "F: dropout state 'rng.rank0.worker0.transformer.drop' must be int64 (6)"));
}
