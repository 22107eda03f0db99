// Training with --precision bf16 (RunConfig::precision, framework/engine/autocast.hpp): a short
// toy run reaches float32's loss within a stated bound (and is not float32's run: the negative
// control), the guard rounds the weights once per step, the checkpoint holds float32 weights and
// the precision, a resumed run ends bit for bit where the whole run does, 1 and 2 threads over the
// same shards give the same bits; the refusals (a CPU without bf16, simulated; reference mode;
// a resume asking for another precision), the note and `headgrad info`'s lines.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/engine/autocast.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/kernels.hpp"
#include "tests/test_support.hpp"
#include "train/loop/trainer.hpp"
#include "train/run/checkpoint.hpp"

using namespace headgrad;
using namespace headgrad::train;
using test_support::contains;
using test_support::error_of;
using test_support::TempDir;
namespace fs = std::filesystem;

namespace {

// A small toy run (the copy task), quiet, evaluated at its end only.
TrainOptions toy(const std::string& precision, std::int64_t steps, const std::string& out) {
  TrainOptions o;
  o.run = {.task = data::Task::copy, .steps = steps, .batch = 32, .d_model = 32, .heads = 2, .layers = 2, .ffn = 64,
           .max_len = 10, .min_len = 3, .vocab = 12, .lr = 0.003, .warmup = 20, .seed = 4};
  o.run.precision = precision;
  o.eval_every = 0;
  o.eval_count = 200;
  o.threads = 1;
  o.quiet = true;
  o.out_dir = out;
  return o;
}

std::vector<double> parameters_of(const std::string& model_path) {
  std::vector<double> out;
  for (const auto& [name, p] : load_model_checkpoint(model_path).model->named_parameters()) {
    CHECK(p.dtype() == DType::f32); // master weights: float32 in the checkpoint
    const auto v = p.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void set_env(const char* name, const char* value) { setenv(name, value, 1); }

} // namespace

TEST_CASE("bf16 training: a toy run's loss within 0.05 + 5% of float32's; other bits; float32 weights saved") {
  if (!blas::bf16_supported()) return; // (refused: the case below)
  TempDir dir;
  const TrainSummary f32 = train::train(toy("float32", 200, dir / "f32"));
  const runtime::AutocastStats before = runtime::autocast_stats();
  const TrainSummary bf16 = train::train(toy("bf16", 200, dir / "bf16"));
  const runtime::AutocastStats after = runtime::autocast_stats();
  // The bound: bf16 rounds each gemm input to 8 significant bits (relative error up to 2^-9), a
  // perturbation far below what 200 Adam steps at this learning rate move; measured here: the
  // eval losses differ by well under 1%.
  INFO("float32 eval loss ", f32.eval.loss, ", bf16 ", bf16.eval.loss);
  CHECK(f32.eval.loss < 1.5); // (the run learns: ln 12 = 2.48 at the start)
  CHECK(std::abs(bf16.eval.loss - f32.eval.loss) <= 0.05 + 0.05 * f32.eval.loss);
  // the negative control: bf16 really ran (float32's bits would mean the guard did nothing)
  const std::vector<double> p32 = parameters_of(dir / "f32/model.safetensors");
  const std::vector<double> p16 = parameters_of(dir / "bf16/model.safetensors");
  CHECK(p32 != p16);
  // the guard rounded each weight once per step (not per shard, not per gemm), and nothing in evaluation
  const auto params = static_cast<std::int64_t>(load_model_checkpoint(dir / "bf16/model.safetensors")
                                                    .model->named_parameters()
                                                    .size());
  CHECK(after.weight_buffers - before.weight_buffers == 200 * params);
  CHECK(after.operand_conversions > before.operand_conversions); // activations and gradients, per call
  CHECK(load_model_checkpoint(dir / "bf16/model.safetensors").config.precision == "bf16");
  CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::f32); // the guard closed with the step
}

TEST_CASE("bf16 training: resume is bit for bit; 1 and 2 threads over the same 2 shards give the same bits") {
  if (!blas::bf16_supported()) return;
  TempDir dir;
  TrainOptions o = toy("bf16", 16, dir / "whole");
  o.run.schedule = "constant"; // (a cosine decay depends on --steps, which the first half changes)
  o.run.shards = 2;
  o.run.dropout = 0.1; // the masks continue too
  (void)train::train(o);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const std::string out = dir / ("halves" + std::to_string(threads));
    TrainOptions first = o, rest = o;
    first.threads = rest.threads = threads;
    first.out_dir = rest.out_dir = out;
    first.run.steps = 8;
    (void)train::train(first);
    rest.resume = out + "/model.safetensors";
    (void)train::train(rest);
    CHECK(parameters_of(out + "/model.safetensors") == parameters_of(dir / "whole/model.safetensors"));
  }
}

TEST_CASE("bf16 training: refused on a CPU without bf16 (simulated) and in reference mode, with one line") {
  TempDir dir;
  set_env("HEADGRAD_BF16_ASSUME_MISSING", "1");
  CHECK(error_of<std::invalid_argument>([&] { (void)train::train(toy("bf16", 2, dir / "a")); }) ==
        "--precision bf16: this CPU has no avx512_bf16 or amx_bf16: bf16 training needs one of them");
  unsetenv("HEADGRAD_BF16_ASSUME_MISSING");
  if (blas::bf16_supported()) { // (else the line above is this CPU's own)
    runtime::set_reference(true);
    TrainOptions o = toy("bf16", 2, dir / "b");
    o.run.attention = "composed";
    o.run.shards = 1;
    CHECK(error_of<std::invalid_argument>([&] { (void)train::train(o); }) ==
          "--precision bf16 runs on the engine: reference mode multiplies in float32 only");
    runtime::set_reference(false);
  }
  CHECK(!fs::exists(dir / "a/model.safetensors"));
  CHECK(precision_note(toy("float32", 2, "").run).empty()); // float32 never has a note
}

TEST_CASE("headgrad train --precision bf16: banner, note, JSON; refusals; a resume keeps the checkpoint's precision") {
  TempDir dir;
  using test_support::run_cli;
  const std::vector<std::string> run = {"train", "--task", "copy", "--steps", "3", "--batch", "8", "--d-model", "16",
                                        "--heads", "2", "--layers", "1", "--ffn", "16", "--threads", "1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = run;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  // a CPU without bf16 (simulated): one line, exit 2, nothing written
  const test_support::CliRun missing =
      run_cli(with({"--precision", "bf16", "--out", dir / "m"}), dir.path, {{"HEADGRAD_BF16_ASSUME_MISSING", "1"}});
  CHECK(test_support::refusal_line(missing) ==
        "headgrad train: --precision bf16: this CPU has no avx512_bf16 or amx_bf16: bf16 training needs one of them");
  CHECK(!fs::exists(dir / "m"));
  const test_support::CliRun info_missing = run_cli({"info"}, dir.path, {{"HEADGRAD_BF16_ASSUME_MISSING", "1"}});
  CHECK(contains(info_missing.out, "bf16 gemms:      not available: this CPU has no avx512_bf16 or amx_bf16"));
  const test_support::CliRun info = run_cli({"info"}, dir.path);
  CHECK(contains(info.out, "Linear gemms:    float32 on OpenBLAS's sgemm (the default; "));
  CHECK(contains(info.out, "oneDNN:          oneDNN "));
  CHECK(contains(run_cli({"info"}, dir.path, {{"HEADGRAD_GEMM", "onednn"}}).out,
                 "Linear gemms:    float32 on oneDNN's float32 matmul (HEADGRAD_GEMM=onednn)"));
  if (!blas::bf16_supported()) {
    CHECK(contains(info.out, "bf16 gemms:      not available: "));
    return;
  }
  CHECK(contains(info.out, "bf16 gemms:      available ("));
  const test_support::CliRun reference = run_cli(with({"--precision", "bf16", "--reference", "--out", dir / "r"}), dir.path);
  CHECK(test_support::refusal_line(reference) ==
        "headgrad train: --precision bf16 runs on the engine: reference mode multiplies in float32 only");
  const test_support::CliRun trained = run_cli(with({"--precision", "bf16", "--out", dir / "t"}), dir.path);
  INFO("stdout: ", trained.out, "\nstderr: ", trained.err);
  REQUIRE(trained.rc == 0);
  CHECK(contains(trained.out, "3 steps, precision bf16 (linear layers' gemms)"));
  CHECK(contains(trained.out, ", precision bf16\n"));
  // the note: only where bf16 runs below float32's speed, and then as a note (one line)
  const bool slow = !blas::bf16_slow_note().empty();
  CHECK(contains(trained.err, "headgrad: note: this CPU shows no AMX") == slow);
  CHECK(trained.err_lines().empty());
  // a resume keeps the checkpoint's precision; asking for another is refused
  const std::string ckpt = dir / "t/model.safetensors";
  const test_support::CliRun other = run_cli(
      {"train", "--resume", ckpt, "--steps", "4", "--precision", "float32", "--out", dir / "t", "--threads", "1"},
      dir.path);
  CHECK(test_support::refusal_line(other) ==
        fmt::format("headgrad train: --precision float32 differs from the checkpoint's bf16 ({}); drop the flag to "
                    "resume",
                    ckpt));
  const test_support::CliRun resumed =
      run_cli({"train", "--resume", ckpt, "--steps", "4", "--out", dir / "t", "--threads", "1", "--json"}, dir.path);
  CHECK(resumed.rc == 0);
  CHECK(contains(resumed.out, "\"precision\": \"bf16\""));
}
