// The parallel step (train/parallel/parallel_step.hpp) with the batch's rows split over threads
// (train/parallel/thread_replicas.hpp): the same loss and gradients as the textbook step
// (train/loop/train_step.hpp) on the whole batch (float64, to rounding), with even and uneven
// shards and a batch smaller than the number of workers; the replicas follow every update; the
// split run is deterministic; with a shard count, the same bits whatever the worker count (the
// shard tree, framework/distributed/shard_tree.hpp); and over one shard, the textbook step's bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <omp.h>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/engine/profiler.hpp"
#include "train/run/run_optimizer.hpp"
#include "train/loop/train_step.hpp"
#include "train/parallel/parallel_step.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace headgrad::train;
using test_support::check_close;
using test_support::gradients_of;

namespace {

RunConfig tiny_run() {
  return {.task = data::Task::sort, .d_model = 8, .heads = 2, .layers = 2, .ffn = 12, .max_len = 6, .min_len = 2,
          .vocab = 9, .seed = 3};
}

struct Run {
  std::unique_ptr<models::SequenceModel> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<ThreadReplicas> workers;
};

Run make_run(const RunConfig& c, int workers) {
  Run r;
  r.model = std::make_unique<models::SequenceModel>(c.model_config(), c.seed, DType::f64);
  r.opt = make_optimizer(c, r.model->named_parameters());
  if (workers > 1) r.workers = std::make_unique<ThreadReplicas>(*r.model, workers, c.seed);
  return r;
}

std::vector<double> values_of(const models::SequenceModel& m) {
  std::vector<double> out;
  for (const auto& [name, p] : m.named_parameters()) {
    const auto v = p.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// Runs `steps` steps of batch size B - the parallel step with replicas, the textbook step without;
// returns the losses, and leaves the last step's (clipped) gradients.
std::vector<double> steps_of(Run& r, const RunConfig& c, std::int64_t B, int steps) {
  std::vector<double> losses;
  for (int s = 1; s <= steps; ++s) {
    const data::Batch b = data::make_batch(c.task_config(), c.seed, static_cast<std::uint64_t>(s - 1), B);
    const StepSettings settings{s, 1e-2, /*clip=*/1.0};
    losses.push_back(r.workers ? parallel_step(*r.model, *r.opt, b, settings, {0, r.workers.get()}).loss
                               : train_step(*r.model, *r.opt, b, settings).loss);
  }
  return losses;
}

} // namespace

TEST_CASE("train_step split over 2 and 3 threads = one thread on the whole batch") {
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  const RunConfig c = tiny_run();
  for (std::int64_t B : {8, 5, 1}) { // even shards, uneven shards, fewer rows than workers
    for (int workers : {2, 3}) {
      INFO("batch ", B, ", ", workers, " workers");
      Run one = make_run(c, 1), split = make_run(c, workers);
      const auto l1 = steps_of(one, c, B, 3), l2 = steps_of(split, c, B, 3);
      check_close(l2, l1, 1e-12);                                      // the same objective, step after step
      check_close(gradients_of(*split.model), gradients_of(*one.model), 1e-11); // the same gradient
      check_close(values_of(*split.model), values_of(*one.model), 1e-11);       // the replicas saw every update
    }
  }
  omp_set_num_threads(before);
}

TEST_CASE("train_step split over threads is deterministic (float32, the training dtype)") {
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  RunConfig c = tiny_run();
  auto run_f32 = [&] {
    Run r;
    r.model = std::make_unique<models::SequenceModel>(c.model_config(), c.seed);
    r.opt = make_optimizer(c, r.model->named_parameters());
    r.workers = std::make_unique<ThreadReplicas>(*r.model, 2, c.seed);
    const auto losses = steps_of(r, c, 16, 5);
    auto v = values_of(*r.model);
    v.insert(v.end(), losses.begin(), losses.end());
    return v;
  };
  CHECK(run_f32() == run_f32());
  omp_set_num_threads(before);
}

TEST_CASE("the profiler records each worker's time in its shards, per step (train --profile's workers line)") {
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  const RunConfig c = tiny_run();
  SUBCASE("three workers, profiler on: one record per step, each worker's time and the slowest's") {
    Run r = make_run(c, 3);
    profiler_reset();
    profiler_enable(true);
    steps_of(r, c, 9, 4);
    profiler_enable(false);
    const WorkersProfile w = profiler_workers();
    CHECK(w.steps == 4);
    REQUIRE(w.seconds.size() == 3);
    double sum = 0;
    for (double t : w.seconds) {
      CHECK(t > 0);
      sum += t;
    }
    // per step the slowest is at least the mean of the three and at most their sum; the fastest
    // waited the slowest's time less its own, which is at most the slowest's
    CHECK(w.slowest_seconds >= *std::max_element(w.seconds.begin(), w.seconds.end()));
    CHECK(w.slowest_seconds <= sum);
    CHECK(w.wait_seconds >= 0);
    CHECK(w.wait_seconds <= w.slowest_seconds);
    profiler_reset();
    CHECK(profiler_workers().steps == 0);
    CHECK(profiler_workers().seconds.empty());
  }
  SUBCASE("profiler off, or one thread on the whole batch: nothing recorded") {
    for (int workers : {3, 1}) {
      CAPTURE(workers);
      Run r = make_run(c, workers);
      profiler_reset();
      profiler_enable(workers == 1); // on for the one-thread run, off for the split one
      steps_of(r, c, 9, 2);
      profiler_enable(false);
      CHECK(profiler_workers().steps == 0);
    }
  }
  omp_set_num_threads(before);
}

TEST_CASE("train_step with 4 shards: 1 - 2 or 4 workers and shard dropout give the same bits (float32)") {
  const int before = omp_get_max_threads();
  omp_set_num_threads(4);
  RunConfig c = tiny_run();
  c.dropout = 0.1;
  auto run_f32 = [&](int workers, std::int64_t B) {
    Run r;
    r.model = std::make_unique<models::SequenceModel>(c.model_config(), c.seed);
    r.opt = make_optimizer(c, r.model->named_parameters());
    if (workers > 1) r.workers = std::make_unique<ThreadReplicas>(*r.model, workers, c.seed);
    ShardDropout masks(*r.model, c.seed, 4, {0, 4});
    std::vector<double> v;
    for (int s = 1; s <= 4; ++s) {
      const data::Batch b = data::make_batch(c.task_config(), c.seed, static_cast<std::uint64_t>(s - 1), B);
      v.push_back(parallel_step(*r.model, *r.opt, b, {s, 1e-2, 1.0}, {/*shards=*/4, r.workers.get(), nullptr, &masks})
                      .loss);
    }
    const auto p = values_of(*r.model);
    v.insert(v.end(), p.begin(), p.end());
    return v;
  };
  for (std::int64_t B : {16, 5}) { // 5: shards of 1, 1, 1 and 2 rows
    CAPTURE(B);
    const auto one = run_f32(1, B);
    CHECK(run_f32(2, B) == one);
    CHECK(run_f32(4, B) == one);
  }
  omp_set_num_threads(before);
}

TEST_CASE("ThreadReplicas::add_gradients_to_model: the shard tree over the workers") {
  RunConfig c = tiny_run();
  Run r = make_run(c, 4);
  const data::Batch b = data::make_batch(c.task_config(), c.seed, 0, 8);
  std::vector<std::vector<double>> g;
  for (int i = 0; i < 4; ++i) {
    const data::Batch rows = data::slice_batch(b, 2 * i, 2);
    const Tensor logits = r.workers->worker(i).forward(rows.tokens, rows.valid_lens);
    ops::cross_entropy(logits, rows.targets, ops::sequence_mask(rows.valid_lens, rows.tokens.shape()[1])).backward();
    g.push_back(gradients_of(r.workers->worker(i)));
  }
  r.workers->add_gradients_to_model();
  std::vector<double> want = g[0];
  std::vector<double> in_order = want;
  for (std::size_t k = 0; k < want.size(); ++k) {
    want[k] = (g[0][k] + g[1][k]) + (g[2][k] + g[3][k]); // (float64: the model is make_run's)
    in_order[k] = ((g[0][k] + g[1][k]) + g[2][k]) + g[3][k];
  }
  CHECK(gradients_of(*r.model) == want);
  CHECK(want != in_order); // (the grouping shows in the bits)
  for (const auto& [name, p] : r.workers->worker(3).named_parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("check_gradients names the parameter whose gradient is not finite, not the first one clipping spoils") {
  // Clipping by a NaN norm makes every gradient NaN (as torch does), so the check looks before it.
  Tensor a = Tensor::from({1.0f, 2.0f}, {2}), b = Tensor::from({3.0f}, {1});
  a.set_requires_grad();
  b.set_requires_grad();
  ops::sum(a * a + ops::sum(b) * std::numeric_limits<float>::quiet_NaN()).backward(); // b's gradient: NaN
  const nn::NamedTensors params = {{"a", a}, {"b", b}};
  CHECK_THROWS_WITH_AS(check_gradients(params, 1.0, 7),
                       "step 7: the gradient of 'b' is not finite; training stopped before the update", NonFiniteError);
  CHECK(std::isfinite(a.grad().to_vector()[0])); // nothing was clipped
  // finite gradients: the norm is returned, the gradients left for clip_gradients to scale
  Tensor c = Tensor::from({3.0f, 4.0f}, {2});
  c.set_requires_grad();
  ops::sum(c * Tensor::from({1.0f, 1.0f}, {2})).backward(); // gradient [1, 1], norm sqrt(2)
  const double norm = check_gradients({{"c", c}}, 1.0, 1);
  CHECK(norm == doctest::Approx(std::sqrt(2.0)));
  check_close(c.grad().to_vector(), {1.0, 1.0}, 0, 0);
  CHECK(optim::clip_coefficient(1.0, std::sqrt(2.0)) == doctest::Approx(1 / (std::sqrt(2.0) + 1e-6)));
  clip_gradients({{"c", c}}, 0, norm); // no clipping: nothing changes
  check_close(c.grad().to_vector(), {1.0, 1.0}, 0, 0);
  clip_gradients({{"c", c}}, 1.0, norm); // to norm 1, in place
  const float f = static_cast<float>(optim::clip_coefficient(1.0, norm));
  CHECK(c.grad().to_vector() == std::vector<double>{f, f});
}

TEST_CASE("the textbook step = the parallel step over one shard, bit for bit (float32, dropout, clipping)") {
  // The trainer runs the textbook step when one thread trains on the whole batch and the parallel
  // step otherwise: over one shard the two must agree to the bit. (On one thread: the parallel
  // step runs a shard's ops on one thread, and an op split over several may add in another order.)
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  RunConfig c = tiny_run();
  c.dropout = 0.1;
  auto run_f32 = [&](std::int64_t shards, bool textbook) {
    Run r;
    r.model = std::make_unique<models::SequenceModel>(c.model_config(), c.seed);
    r.opt = make_optimizer(c, r.model->named_parameters());
    ShardDropout masks(*r.model, c.seed, shards, {0, shards});
    std::vector<double> v;
    for (int s = 1; s <= 4; ++s) {
      const data::Batch b = data::make_batch(c.task_config(), c.seed, static_cast<std::uint64_t>(s - 1), 16);
      // clip 0.2: every step's gradient norm is above it, so the clipping scales
      const StepSettings settings{s, 1e-2, 0.2};
      const StepResult step = textbook ? train_step(*r.model, *r.opt, b, settings)
                                       : parallel_step(*r.model, *r.opt, b, settings, {shards, nullptr, nullptr, &masks});
      v.push_back(step.loss);
      v.push_back(step.grad_norm);
      CHECK(step.grad_norm > 0.2);
    }
    const auto p = values_of(*r.model), g = gradients_of(*r.model);
    v.insert(v.end(), p.begin(), p.end());
    v.insert(v.end(), g.begin(), g.end());
    return v;
  };
  const auto textbook = run_f32(1, true);
  CHECK(run_f32(1, false) == textbook);
  CHECK(run_f32(2, false) != textbook); // negative control: two shards add in another order
  omp_set_num_threads(before);
}
