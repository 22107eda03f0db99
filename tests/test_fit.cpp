// test_fit.cpp - train::Trainer (train/fit/trainer.hpp) on a model of the test's own: exact resume,
// the same bits on 1 and 2 threads over the same shard count, a stop signal that saves, a NaN loss
// that stops before the update naming the intact checkpoint, and what it refuses. (The same
// resume with SIGKILL, by a program built against the installed package: tests/trainer_consumer.)
#include <cstring>

#include "framework/io/safetensors.hpp"
#include "framework/nn/layers.hpp"
#include "framework/ops/ops.hpp"
#include "framework/optim/optimizer.hpp"
#include "test_support.hpp"
#include "tests/dropout_regression_net.hpp"
#include "train/fit/trainer.hpp"

using namespace headgrad;
using test_support::TempDir;
using test_support::contains;
using test_support::error_of;

namespace {

// A small regression net with dropout: its masks are part of what a checkpoint must keep.
struct Net : test_models::DropoutRegressionNet {
  Net() : DropoutRegressionNet(4, 16, 0.2, 11) {}
};

// y = the sum of x's four entries, 8 rows a batch; batch `nan_at` (if >= 0) holds a NaN; asking
// for batch `stop_at` (if >= 0) raises SIGTERM (the handler is installed) or calls request_stop().
struct Sums {
  std::int64_t nan_at = -1, stop_at = -1;
  bool raise_signal = false;
  train::Batch batch(std::uint64_t i) const {
    Generator g(mix_seed(5, i));
    Tensor x = Tensor::normal({8, 4}, 0.0, 1.0, g);
    Tensor y = ops::sum(x, {1}, true);
    if (static_cast<std::int64_t>(i) == nan_at) x = x * Tensor::scalar(std::nan(""));
    if (static_cast<std::int64_t>(i) == stop_at) {
      if (raise_signal) std::raise(SIGTERM);
      else train::request_stop();
    }
    return {{"x", x}, {"y", y}};
  }
};

Tensor mse(Net& net, const train::Batch& b) {
  const Tensor d = net.forward(b["x"]) - b["y"];
  return ops::mean(d * d);
}

std::unique_ptr<optim::Optimizer> adam(nn::NamedTensors p) {
  return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 1e-2});
}

train::Trainer<Net> trainer(const std::string& dir, std::int64_t steps, int threads, std::int64_t shards, Sums data = {}) {
  train::TrainerOptions o{.out_dir = dir, .steps = steps, .seed = 3, .threads = threads, .shards = shards, .clip = 1.0};
  o.lr = [](std::int64_t s) { return 1e-2 / (1.0 + 0.05 * static_cast<double>(s)); };
  o.save_every = 7;
  o.quiet = true;
  return train::Trainer<Net>([] { return std::make_unique<Net>(); }, mse, adam, data, o);
}

// Every parameter's values, in order.
std::vector<double> values(Net& net) {
  std::vector<double> v;
  for (const auto& [name, p] : net.named_parameters()) {
    const auto t = p.to_vector();
    v.insert(v.end(), t.begin(), t.end());
  }
  return v;
}
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

} // namespace

TEST_CASE("Trainer: stopped after step 12 and resumed, it ends with the bits of the uninterrupted run") {
  for (auto [threads, shards] : {std::pair{1, 1}, std::pair{2, 2}}) {
    CAPTURE(threads);
    TempDir a, b;
    auto whole = trainer(a.path.string(), 30, threads, shards);
    const train::FitSummary all = whole.fit();
    CHECK(all.steps == 30);
    CHECK(all.losses.size() == 30);
    CHECK(all.losses.back() < all.losses.front());

    { // the first 12 steps, then a new Trainer on the same directory continues them
      auto first = trainer(b.path.string(), 12, threads, shards);
      CHECK(first.fit().steps == 12);
    }
    auto rest = trainer(b.path.string(), 30, threads, shards);
    CHECK(rest.step() == 12); // the checkpoint, loaded by the constructor
    const train::FitSummary tail = rest.fit();
    CHECK(tail.start == 12);
    CHECK(tail.losses.size() == 18);
    CHECK(same_bits(values(rest.model()), values(whole.model())));
    CHECK(same_bits(tail.losses, std::vector<double>(all.losses.begin() + 12, all.losses.end())));
    // the log holds each step once
    const std::string log = test_support::read_file(b / "metrics.csv");
    CHECK(test_support::count_of(log, "\n12,") == 1);
    CHECK(test_support::count_of(log, "\n30,") == 1);
    CHECK(a.temp_files().empty());
  }
}

TEST_CASE("Trainer: 1 thread and 2 threads over the same shard count train the same bits") {
  for (std::int64_t shards : {2, 4}) {
    CAPTURE(shards);
    TempDir one, two;
    auto t1 = trainer(one.path.string(), 20, 1, shards);
    auto t2 = trainer(two.path.string(), 20, 2, shards);
    const auto l1 = t1.fit().losses, l2 = t2.fit().losses;
    CHECK(same_bits(l1, l2));
    CHECK(same_bits(values(t1.model()), values(t2.model())));
  }
  // negative control: another shard count is another run (each shard draws its own dropout masks)
  TempDir x, y;
  auto s1 = trainer(x.path.string(), 20, 1, 1), s2 = trainer(y.path.string(), 20, 1, 2);
  s1.fit();
  s2.fit();
  CHECK_FALSE(same_bits(values(s1.model()), values(s2.model())));
}

TEST_CASE("Trainer: a stop signal saves a checkpoint, and the run resumed from it ends as the uninterrupted one") {
  train::install_interrupt_handler();
  TempDir a, b;
  auto whole = trainer(a.path.string(), 20, 1, 1);
  whole.fit();
  Sums stopping;
  stopping.stop_at = 9; // SIGTERM while step 10 reads its batch: the run stops after step 10
  stopping.raise_signal = true;
  {
    auto t = trainer(b.path.string(), 20, 1, 1, stopping);
    const train::FitSummary s = t.fit();
    CHECK(s.interrupted);
    CHECK(s.stop_signal == SIGTERM);
    CHECK(s.steps == 10);
    CHECK(s.checkpoint == b / "model.safetensors");
    CHECK(io::load_safetensors(b / "model.safetensors").metadata.at("step") == "10");
  }
  CHECK(train::pending_stop_signal() == 0); // handled
  auto rest = trainer(b.path.string(), 20, 1, 1);
  CHECK(rest.step() == 10);
  CHECK_FALSE(rest.fit().interrupted);
  CHECK(same_bits(values(rest.model()), values(whole.model())));
  // a signal before the first step: nothing trained, nothing saved
  train::request_stop();
  const train::FitSummary early = rest.fit();
  CHECK(early.interrupted);
  CHECK(early.losses.empty());
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGHUP, SIG_DFL);
}

TEST_CASE("Trainer: a NaN loss stops before the update, naming the step and the intact checkpoint") {
  TempDir d;
  Sums bad;
  bad.nan_at = 10; // step 11; the last checkpoint is step 7's (save_every 7)
  auto t = trainer(d.path.string(), 20, 1, 1, bad);
  const std::string e = error_of<train::NonFiniteError>([&] { t.fit(); });
  CHECK(contains(e, "step 11: the loss is nan"));
  CHECK(contains(e, "the last checkpoint " + (d / "model.safetensors") + " is intact"));
  CHECK(io::load_safetensors(d / "model.safetensors").metadata.at("step") == "7");
  CHECK(t.step() == 10);
  for (double v : values(t.model())) CHECK(std::isfinite(v)); // the update did not happen
  // the same with 2 threads over 2 shards
  TempDir d2;
  auto t2 = trainer(d2.path.string(), 20, 2, 2, bad);
  CHECK(contains(error_of<train::NonFiniteError>([&] { t2.fit(); }), "step 11: the loss is nan"));
}

TEST_CASE("Trainer: what it refuses") {
  TempDir d;
  trainer(d.path.string(), 5, 1, 1).fit();
  // another shard count than the checkpoint's
  CHECK(contains(error_of<std::invalid_argument>([&] { trainer(d.path.string(), 10, 1, 2); }),
                 "the checkpoint was trained with 1 shards, this run has 2"));
  // resume = false on a directory with a checkpoint
  train::TrainerOptions o{.out_dir = d.path.string(), .steps = 5, .resume = false};
  CHECK(contains(error_of<std::invalid_argument>(
                     [&] { train::Trainer<Net>([] { return std::make_unique<Net>(); }, mse, adam, Sums{}, o); }),
                 "holds the checkpoint of another run"));
  // the directory is locked while a Trainer holds it
  auto holder = trainer(d.path.string(), 10, 1, 1);
  CHECK(contains(error_of<std::invalid_argument>([&] { trainer(d.path.string(), 10, 1, 1); }), "in use"));
  // a batch whose tensors disagree about their rows
  train::Batch b{{"x", Tensor::zeros({8, 4})}, {"y", Tensor::zeros({7, 1})}};
  CHECK(contains(error_of<std::invalid_argument>([&] { b.rows(); }), "tensor 'y' has 7 rows, but 'x' has 8"));
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)b["z"]; }), "no tensor 'z' (the batch holds 'x', 'y')"));
  CHECK(contains(error_of<std::invalid_argument>([&] { trainer("", 10, 1, 1); }), "out_dir is empty"));
}
