// Generation from the causal language model (train/sample/generate.hpp) and `headgrad sample`: greedy
// decoding is the argmax of a full forward at every position, the key/value cache changes nothing
// but the cost, a seed decides the text, and bad flags are one line and exit code 2.
#include <doctest/doctest.h>

#include <set>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "train/sample/generate.hpp"
#include "test_support.hpp"
#include "tiny_models.hpp"
#include "train/loop/trainer.hpp"

using namespace headgrad;
using namespace headgrad::models;
using test_support::contains;
using test_support::error_of;

namespace {

// A tiny model whose weights are large enough that its logits differ clearly between tokens (the
// N(0, 0.02) init makes them nearly equal, and greedy decoding a matter of rounding).
std::unique_ptr<GPT> tiny_gpt(DType dtype) {
  const GPTConfig c = tiny::gpt({.vocab = 9, .d_model = 8, .heads = 2, .layers = 2, .ffn = 16}, /*block_size=*/8);
  auto m = std::make_unique<GPT>(c, 4, dtype);
  Generator g(5);
  for (auto& p : m->parameters()) {
    const Tensor w = Tensor::normal(p.shape(), 0.0, 1.5, g, dtype);
    dispatch_float(dtype, "tiny_gpt", [&]<typename T>() { std::copy(w.data<T>(), w.data<T>() + w.numel(), p.data<T>()); });
  }
  return m;
}

GenerateOptions greedy(std::int64_t tokens, bool cache) {
  GenerateOptions o;
  o.tokens = tokens;
  o.sample.temperature = 0.0;
  o.kv_cache = cache;
  return o;
}

} // namespace

TEST_CASE("window_start: the window keeps block_size tokens at most and jumps to the last half") {
  CHECK(window_start(0, 8, 8) == 0);
  CHECK(window_start(0, 9, 8) == 5); // keeps 4
  CHECK(window_start(5, 12, 8) == 5);
  CHECK(window_start(5, 14, 8) == 10);
  CHECK(window_start(0, 2, 1) == 1); // block_size 1: the last token alone
}

TEST_CASE("generate: greedy tokens are the argmax of a full forward at every position") {
  const auto owner = tiny_gpt(DType::f64);
  GPT& m = *owner;
  const std::vector<std::int64_t> prompt = {3, 7};
  Generator gen(0);
  const std::vector<std::int64_t> out = generate(m, prompt, greedy(6, true), gen); // 8 = block_size tokens in all
  REQUIRE(out.size() == 6);
  std::vector<std::int64_t> all = prompt;
  all.insert(all.end(), out.begin(), out.end());
  // one forward over the whole sequence: position t's argmax is token t + 1
  NoGradGuard ng;
  m.eval();
  const Tensor logits = m.forward(Tensor::from_ints(all, {1, 8}));           // (1, 8, 9)
  const std::vector<std::int64_t> argmax = ops::argmax(logits, -1).to_int_vector(); // (1, 8)
  for (std::size_t t = 1; t + 1 < all.size(); ++t) {
    CAPTURE(t);
    CHECK(argmax[t] == all[t + 1]);
  }
  CHECK(std::set<std::int64_t>(out.begin(), out.end()).size() > 1); // not one token over and over
}

TEST_CASE("generate: past block_size the cached and uncached windows give the same text") {
  const auto owner = tiny_gpt(DType::f64);
  GPT& m = *owner;
  Generator g1(0), g2(0);
  const auto cached = generate(m, {1}, greedy(30, true), g1), full = generate(m, {1}, greedy(30, false), g2);
  CHECK(cached == full);
  // and a drawn text too (temperature 1, top-k 4): the same draws from the same logits
  GenerateOptions o;
  o.tokens = 30;
  o.sample.top_k = 4;
  Generator g3(11), g4(11);
  const auto a = generate(m, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, o, g3); // a prompt longer than block_size
  o.kv_cache = false;
  CHECK(generate(m, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, o, g4) == a);
}

TEST_CASE("generate: the same seed gives the same tokens and another seed others") {
  const auto owner = tiny_gpt(DType::f32);
  GPT& m = *owner;
  GenerateOptions o;
  o.tokens = 40;
  Generator a(1), b(1), c(2);
  std::vector<std::int64_t> streamed;
  const auto first = generate(m, {0}, o, a, [&](std::int64_t t) { streamed.push_back(t); });
  CHECK(first == streamed); // every token passed on as it was drawn
  CHECK(generate(m, {0}, o, b) == first);
  CHECK(generate(m, {0}, o, c) != first);
  CHECK(m.training()); // the mode is restored
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)generate(m, {}, o, a); }), "at least one token"));
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)generate(m, {9}, o, a); }),
                 "prompt token 9 is outside the vocabulary [0, 9)"));
}

namespace {

using test_support::TempDir; // named after this file

// A checkpoint of a short text run (counting words), in dir / "run".
std::string trained_checkpoint(const TempDir& dir) {
  test_support::write_file(dir / "text.txt",
                           test_support::repeated("one two three four five six seven eight nine ten\n", 40));
  return train::train(tiny::text_training(dir / "text.txt", 120, dir / "run", /*eval_count=*/20)).checkpoint;
}

} // namespace

TEST_CASE("headgrad sample: streams text, the same seed gives the same text") {
  TempDir dir;
  const std::string ckpt = trained_checkpoint(dir);
  auto sample = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"sample", "--checkpoint", ckpt, "--tokens", "60"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test_support::run_cli(args, dir.path);
  };
  const auto a = sample({"--seed", "7"}), b = sample({"--seed", "7"}), c = sample({"--seed", "8"});
  REQUIRE(a.rc == 0);
  CHECK(a.err_lines().empty());
  CHECK(a.out.size() == 60 + 1); // 60 characters (the text is ASCII) and a newline; the start "\n" is not printed
  CHECK(b.out == a.out);
  CHECK(c.out != a.out);
  // greedy from a prompt: the prompt, then the model's continuation of the counting
  const auto g = sample({"--prompt", "one two three ", "--temperature", "0"});
  REQUIRE(g.rc == 0);
  CHECK(test_support::starts_with(g.out, "one two three four"));
  // the key/value cache changes nothing but the cost
  CHECK(sample({"--prompt", "one two three ", "--temperature", "0", "--no-cache"}).out == g.out);
}

TEST_CASE("headgrad sample: bad flags are one line and exit code 2") {
  TempDir dir;
  const std::string ckpt = trained_checkpoint(dir);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"sample"}, "--checkpoint FILE is required"},
      {{"sample", "--checkpoint", ckpt, "--temperature", "-1"}, "--temperature must be 0 (greedy) or between"},
      {{"sample", "--checkpoint", ckpt, "--top-k", "-2"}, "--top-k must be at least 0"},
      {{"sample", "--checkpoint", ckpt, "--tokens", "many"}, "--tokens must be an integer"},
      {{"sample", "--checkpoint", ckpt, "--prompt", "ZEBRA"}, "--prompt:"},
      {{"sample", "--checkpoint", dir / "missing.safetensors"}, "missing.safetensors"},
      {{"sample", "--checkpoint", ckpt, "--color"}, "--color"},
  };
  for (const auto& [args, part] : cases) {
    CAPTURE(part);
    const auto r = test_support::run_cli(args, dir.path);
    CHECK(contains(test_support::refusal_line(r), part));
  }
}

TEST_CASE("headgrad train --task text refuses an empty or binary or too short text in one line") {
  TempDir dir;
  test_support::write_file(dir / "empty.txt", "");
  test_support::write_file(dir / "binary.txt", std::string("abc\0def", 7) + std::string(500, 'x'));
  test_support::write_file(dir / "short.txt", "a few words\n");
  for (const std::string name : {"empty.txt", "binary.txt", "short.txt", "missing.txt"}) {
    CAPTURE(name);
    const auto r = test_support::run_cli({"train", "--task", "text", "--text", dir / name, "--steps", "1",
                                          "--out", dir / "run"},
                                         dir.path);
    CHECK(contains(test_support::refusal_line(r), name));
    CHECK_FALSE(std::filesystem::exists(dir / "run/model.safetensors"));
  }
}

// Fault 15: a subnormal temperature is a finite number, and sampling with it is well defined (the
// logits' differences divided by it are 0 or -inf: the argmax, as greedy); the refusals say the
// real bounds - 0 for greedy, else from the smallest positive double up to 1e6.
TEST_CASE("headgrad sample: fault 15: --temperature 1e-320 samples; the refusal states the real range") {
  TempDir dir;
  const std::string ckpt = trained_checkpoint(dir);
  auto sample = [&](const std::string& temperature) {
    return test_support::run_cli({"sample", "--checkpoint", ckpt, "--tokens", "30", "--prompt", "one two three ",
                                  "--temperature", temperature},
                                 dir.path);
  };
  const auto greedy = sample("0"), tiny = sample("1e-320");
  REQUIRE(greedy.rc == 0);
  CAPTURE(tiny.err);
  REQUIRE(tiny.rc == 0);
  CHECK(tiny.out == greedy.out);
  for (const std::string bad : {"-1", "1e-400", "2e6", "nan", "inf", "warm"}) {
    CAPTURE(bad);
    const auto r = sample(bad);
    const std::string line = test_support::refusal_line(r);
    CHECK(contains(line, "--temperature must be 0 (greedy) or between 4.9e-324 and 1e6"));
    CHECK(contains(line, "'" + bad + "'"));
  }
}
