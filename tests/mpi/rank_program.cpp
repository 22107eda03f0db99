// rank_program.cpp - what tests/test_mpi.cpp runs on every rank under mpirun, where the headgrad
// binary cannot show it: the ranks' own parameters and gradients. Each mode writes its results
// to PREFIX.rank<r>.safetensors (or prints one line per rank) for the test to compare.
//
//   steps PREFIX STEPS BATCH THREADS SHARDS   the reference model's data-parallel step (parallel_step),
//                                      STEPS steps, each batch in SHARDS shards (0: ranks x
//                                      threads, as headgrad train); writes every parameter and
//                                      "losses"
//   user-module PREFIX ROWS            TwoLayerNet (user_module.hpp) under DataParallel and under
//                                      allreduce_gradients; writes "param.*", "ddp.*", "simple.*"
//   different-modules                  rank 1 builds another module: DataParallel must refuse
//   drift                              rank 1 changes one parameter by one ulp: check_no_drift
//                                      must name it on every rank
//   trainer DIR STEPS THREADS          train::Trainer on a net of its own (4 shards a batch, dropout),
//                                      continuing DIR's checkpoint if any; rank 0 prints
//                                      "step N: crc32c XXXXXXXX" of the parameters' bytes
//   stall                              the last rank sleeps (busy, answering nothing) while the
//                                      others sum with a rank timeout of 1 s: rank 0 must give up
//                                      naming it, and end the job
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>
#include <fmt/format.h>
#include <stdexcept>
#include <string>

#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/distributed/data_parallel.hpp"
#include "framework/distributed/shard_tree.hpp"
#include "framework/io/crc32c.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/nn/layers.hpp"
#include "framework/ops/ops.hpp"
#include "framework/optim/optimizer.hpp"
#include "train/fit/trainer.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "tests/dropout_regression_net.hpp"
#include "tests/mpi/user_module.hpp"
#include "train/parallel/rank_checks.hpp"
#include "train/parallel/rank_shard.hpp"
#include "train/run/run_optimizer.hpp"
#include "train/parallel/parallel_step.hpp"

using namespace headgrad;
namespace distributed = headgrad::distributed;

namespace {

std::string rank_file(const std::string& prefix) { return fmt::format("{}.rank{}.safetensors", prefix, distributed::rank()); }

// `steps` steps of the reference model as headgrad train takes them: its defaults, but for the
// learning rate and warmup test_mpi.cpp pins (--lr 0.003 --warmup 300).
struct Run {
  train::RunConfig cfg;
  std::unique_ptr<models::SequenceModel> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<train::ThreadReplicas> workers;
  std::unique_ptr<distributed::BucketedAllreduce> across_ranks;
  std::vector<double> losses;

  Run(std::int64_t batch, int threads, std::int64_t shards) {
    cfg.batch = batch;
    cfg.lr = 0.003;
    cfg.warmup = 300;
    cfg.shards = shards > 0 ? shards : std::min<std::int64_t>(batch, std::int64_t{threads} * distributed::size());
    runtime::set_threads(threads);
    model = std::make_unique<models::SequenceModel>(cfg.model_config(), cfg.seed);
    optimizer = train::make_optimizer(cfg, model->named_parameters());
    const std::int64_t mine = distributed::rank_shards(cfg.shards, distributed::size(), distributed::rank()).count();
    workers = train::workers_for(*model, static_cast<int>(std::min<std::int64_t>(threads, mine)), cfg.seed);
    across_ranks = train::gradient_allreduce_for(*model, workers.get(), cfg.shards);
  }
  void steps(std::int64_t first, std::int64_t last) {
    const optim::LrSchedule schedule = train::lr_schedule(cfg);
    for (std::int64_t s = first; s <= last; ++s) {
      const data::Batch b = data::make_batch(cfg.task_config(), cfg.seed, static_cast<std::uint64_t>(s - 1), cfg.batch);
      losses.push_back(train::parallel_step(*model, *optimizer, b, {s, schedule.at(s), cfg.clip},
                                            {cfg.shards, workers.get(), across_ranks.get()})
                           .loss);
    }
  }
};

int steps_mode(const std::string& prefix, std::int64_t steps, std::int64_t batch, int threads, std::int64_t shards) {
  Run run(batch, threads, shards);
  run.steps(1, steps);
  NamedTensors out = run.model->named_parameters();
  out.emplace_back("losses", Tensor::from(run.losses, {static_cast<std::int64_t>(run.losses.size())}, DType::f64));
  io::save_safetensors(rank_file(prefix), out);
  return 0;
}

int user_module_mode(const std::string& prefix, std::int64_t rows) {
  using namespace user_module;
  // A different initialisation on every rank: DataParallel must start them all from rank 0's.
  TwoLayerNet net(100 + static_cast<std::uint64_t>(distributed::rank()));
  distributed::DataParallel ddp(net, /*bucket_bytes=*/64); // several buckets even for this small net
  NamedTensors out;
  for (const auto& [name, p] : net.named_parameters()) out.emplace_back("param." + name, p.clone().detach());
  const Rows batch = global_batch(rows);
  const train::Shard shard = train::shard_of(rows, distributed::rank(), distributed::size());
  net.zero_grad();
  if (shard.count > 0) ddp.backward(shard_loss(net, batch, shard.first, shard.count));
  else ddp.backward_without_data();
  for (const auto& [name, p] : net.named_parameters()) out.emplace_back("ddp." + name, p.grad().clone());
  net.zero_grad();
  if (shard.count > 0) shard_loss(net, batch, shard.first, shard.count).backward();
  distributed::allreduce_gradients(net);
  for (const auto& [name, p] : net.named_parameters()) out.emplace_back("simple." + name, p.grad().clone());
  io::save_safetensors(rank_file(prefix), out);
  return 0;
}

// Runs `attempt`, which must throw an E on this rank: prints "rank R <verb>: <what>" and returns 0
// if it does, "rank R: <otherwise>" and 1 if it does not.
template <typename E, typename F> int expect_thrown(F&& attempt, const char* verb, const char* otherwise) {
  try {
    attempt();
  } catch (const E& e) {
    std::printf("rank %d %s: %s\n", distributed::rank(), verb, e.what());
    return 0;
  }
  std::printf("rank %d: %s\n", distributed::rank(), otherwise);
  return 1;
}

int different_modules_mode() {
  user_module::TwoLayerNet same(1);
  Generator gen(2);
  nn::Linear other(4, 5, true, gen, DType::f64);
  return expect_thrown<std::invalid_argument>(
      [&] {
        if (distributed::rank() == 1) distributed::DataParallel ddp(other);
        else distributed::DataParallel ddp(same);
      },
      "refused", "not refused");
}

int drift_mode() {
  Run run(8, 1, 0);
  run.steps(1, 2);
  train::check_no_drift(*run.model, 2); // identical so far
  if (distributed::rank() == 1) {
    float& x = run.model->dense->bias.data<float>()[0];
    x = std::nextafter(x, 1.0f);
  }
  return expect_thrown<distributed::CollectiveError>([&] { train::check_no_drift(*run.model, 3); }, "stopped",
                                                     "no drift found");
}

int stall_mode() {
  distributed::set_rank_timeout(1);
  if (distributed::rank() == distributed::size() - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60)); // the job ends before
    return 1;
  }
  std::vector<float> x(1000, 1.0f);
  try {
    distributed::allreduce_sum(x.data(), static_cast<std::int64_t>(x.size()));
  } catch (const distributed::RankTimeout& e) {
    std::string silent;
    for (int r : e.silent) silent += " " + std::to_string(r);
    std::printf("rank %d gave up: %s [silent:%s]\n", distributed::rank(), e.what(), silent.c_str());
    std::fflush(stdout);
    distributed::abort_job(3);
  }
  std::printf("rank %d: no timeout\n", distributed::rank());
  return 1;
}

} // namespace

// A regression net of the test's own, trained by train::Trainer over the job's ranks.
struct FitNet : test_models::DropoutRegressionNet {
  FitNet() : DropoutRegressionNet(6, 24, 0.1, 9) {}
};
struct FitData {
  train::Batch batch(std::uint64_t i) const {
    Generator g(mix_seed(77, i));
    Tensor x = Tensor::normal({12, 6}, 0.0, 1.0, g);
    return {{"x", x}, {"y", ops::sum(x * x, {1}, true)}};
  }
};

int trainer_mode(const std::string& dir, std::int64_t steps, int threads) {
  train::TrainerOptions o{.out_dir = dir, .steps = steps, .seed = 5, .threads = threads, .shards = 4, .clip = 1.0};
  o.save_every = 4;
  o.quiet = true;
  train::Trainer<FitNet> t(
      [] { return std::make_unique<FitNet>(); },
      [](FitNet& net, const train::Batch& b) {
        const Tensor d = net.forward(b["x"]) - b["y"];
        return ops::mean(d * d);
      },
      [](nn::NamedTensors p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{.lr = 1e-2}); },
      FitData{}, o);
  const train::FitSummary done = t.fit();
  std::uint32_t crc = 0;
  for (const auto& [name, p] : t.model().named_parameters())
    crc = io::crc32c(p.data<float>(), static_cast<std::size_t>(p.numel()) * sizeof(float), crc);
  if (distributed::rank() == 0) std::printf("step %lld: crc32c %08x\n", static_cast<long long>(done.steps), crc);
  return 0;
}

int main(int argc, char** argv) {
  // the headgrad command's start-up path: the tests compare this program's bits with the command's
  runtime::configure(argc, argv);
  distributed::Session mpi(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "steps" && argc == 7)
      return steps_mode(argv[2], std::stoll(argv[3]), std::stoll(argv[4]), std::stoi(argv[5]), std::stoll(argv[6]));
    if (mode == "user-module" && argc == 4) return user_module_mode(argv[2], std::stoll(argv[3]));
    if (mode == "different-modules") return different_modules_mode();
    if (mode == "drift") return drift_mode();
    if (mode == "stall") return stall_mode();
    if (mode == "trainer" && argc == 5) return trainer_mode(argv[2], std::stoll(argv[3]), std::stoi(argv[4]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", distributed::rank(), e.what());
    distributed::abort_job(1);
  }
  std::fprintf(stderr, "usage: see the comment at the top of tests/mpi/rank_program.cpp\n");
  return 2;
}
