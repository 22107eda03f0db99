// framework/distributed in one process (a job of one rank, as every build and every run without
// mpirun is): the bucket plan, the bucketed all-reduce's hooks and sums over thread workers, what
// it does with unreached parameters, empty shards and misuse, the shards of a batch, checksums,
// and the single-rank forms of agree, first_difference and the DataParallel wrapper. The same code
// over several ranks is tested under mpirun in test_mpi.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <omp.h>
#include <stdexcept>

#include "framework/autograd.hpp"
#include "framework/distributed/bucketed_allreduce.hpp"
#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/distributed/data_parallel.hpp"
#include "tests/mpi/user_module.hpp"
#include "tests/test_support.hpp"
#include "train/rank_shard.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::contains;
using test_support::error_of;
using test_support::gradients_of;
using user_module::TwoLayerNet;

namespace {

// The model and `n - 1` replicas sharing its values (as train::ThreadReplicas makes them).
struct Workers {
  TwoLayerNet model{100};
  std::vector<std::unique_ptr<TwoLayerNet>> replicas;
  explicit Workers(int n) {
    for (int i = 1; i < n; ++i) {
      replicas.push_back(std::make_unique<TwoLayerNet>(200 + i));
      replicas.back()->share_parameters(model);
    }
  }
  TwoLayerNet& worker(int i) { return i == 0 ? model : *replicas[static_cast<std::size_t>(i - 1)]; }
  std::vector<NamedTensors> lists() {
    std::vector<NamedTensors> out{model.named_parameters()};
    for (auto& r : replicas) out.push_back(r->named_parameters());
    return out;
  }
};

} // namespace

TEST_CASE("distributed: a process without a launcher is rank 0 of a job of one") {
  CHECK(distributed::rank() == 0);
  CHECK(distributed::size() == 1);
  CHECK(distributed::local_size() == 1);
  std::vector<double> v = {1.5, -2};
  distributed::allreduce_sum(v.data(), 2);
  CHECK(v == std::vector<double>{1.5, -2});
  CHECK(distributed::allreduce_max(7) == 7);
  CHECK(distributed::allgather("text") == std::vector<std::string>{"text"});
}

TEST_CASE("plan_buckets: reverse order - at most bucket_bytes each unless one parameter is larger - one dtype each") {
  const NamedTensors params = {{"a", Tensor::zeros({10})},        // 40 bytes
                               {"b", Tensor::zeros({4})},         // 16
                               {"c", Tensor::zeros({30})},        // 120: more than the cap alone
                               {"d", Tensor::zeros({2}, DType::f64)}, // 16, another dtype
                               {"e", Tensor::zeros({5})},         // 20
                               {"f", Tensor::zeros({5})}};        // 20
  using Plan = std::vector<std::vector<std::size_t>>;
  CHECK(distributed::plan_buckets(params, 64) == Plan{{5, 4}, {3}, {2}, {1, 0}});
  CHECK(distributed::plan_buckets(params, 1) == Plan{{5}, {4}, {3}, {2}, {1}, {0}});
  CHECK(distributed::plan_buckets(params, 1000) == Plan{{5, 4}, {3}, {2, 1, 0}});
}

TEST_CASE("BucketedAllreduce: the sum over thread workers is the whole batch's gradient - as take_gradients_from adds it") {
  const user_module::Rows batch = user_module::global_batch(7);
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  // reference: one module, the whole batch
  TwoLayerNet whole(100);
  user_module::shard_loss(whole, batch, 0, 7).backward();
  // three workers on rows 0-1, 2-3, 4-6, summed by the all-reduce (over one rank), in small buckets
  Workers w(3), added(3);
  distributed::BucketedAllreduce reduce(w.model.named_parameters(), w.lists(), /*bucket_bytes=*/100);
  CHECK(reduce.bucket_count() == 4);
  for (int step = 0; step < 2; ++step) { // the second step reuses the buffers and hooks
    w.model.zero_grad();
    reduce.begin(3);
#pragma omp parallel num_threads(3)
    {
      const int i = omp_get_thread_num();
      user_module::shard_loss(w.worker(i), batch, 7 * i / 3, 7 * (i + 1) / 3 - 7 * i / 3).backward();
    }
    reduce.finish();
    check_close(gradients_of(w.model), gradients_of(whole), 1e-14);
    for (int i = 1; i < 3; ++i)
      for (const auto& [name, p] : w.worker(i).named_parameters()) CHECK_FALSE(p.grad().defined()); // dropped
  }
  // the same sums, bit for bit, as the replicas' gradients added by take_gradients_from
  for (int i = 0; i < 3; ++i) user_module::shard_loss(added.worker(i), batch, 7 * i / 3, 7 * (i + 1) / 3 - 7 * i / 3).backward();
  for (int i = 1; i < 3; ++i) added.model.take_gradients_from(added.worker(i));
  CHECK(gradients_of(w.model) == gradients_of(added.model));

  const distributed::CommStats& s = reduce.stats();
  CHECK(s.steps == 2);
  CHECK(s.buckets == 4);
  CHECK(s.bytes == 2 * w.model.num_parameters() * 8);
  CHECK(s.comm_seconds >= 0);
  CHECK(s.overlapped_seconds <= s.comm_seconds);
  omp_set_num_threads(before);
}

TEST_CASE("BucketedAllreduce: inactive workers add nothing - unreached parameters and empty shards give zeros") {
  const user_module::Rows batch = user_module::global_batch(4);
  Workers w(2);
  distributed::BucketedAllreduce reduce(w.model.named_parameters(), w.lists(), 64);
  SUBCASE("one of two workers active: only its gradient, the other's is dropped") {
    TwoLayerNet alone(100);
    user_module::shard_loss(alone, batch, 0, 4).backward();
    reduce.begin(1);
    user_module::shard_loss(w.worker(0), batch, 0, 4).backward();
    user_module::shard_loss(w.worker(1), batch, 0, 4).backward(); // not in this step
    reduce.finish();
    check_close(gradients_of(w.model), gradients_of(alone), 0);
    CHECK_FALSE(w.worker(1).hidden->weight.grad().defined());
  }
  SUBCASE("a loss that does not reach the output layer: its gradients are zeros") {
    reduce.begin(2);
    ops::sum(w.worker(0).hidden->forward(batch.x)).backward();
    ops::sum(w.worker(1).hidden->forward(batch.x)).backward();
    reduce.finish();
    CHECK(w.model.out->weight.grad().to_vector() == std::vector<double>(18, 0.0));
    CHECK(w.model.out->bias.grad().to_vector() == std::vector<double>(3, 0.0));
    CHECK(w.model.hidden->bias.grad().to_vector() == std::vector<double>(6, 8.0)); // 2 workers x 4 rows
  }
  SUBCASE("no active worker (a rank without rows): zeros everywhere") {
    reduce.begin(0);
    reduce.finish();
    for (double g : gradients_of(w.model)) CHECK(g == 0.0);
  }
}

TEST_CASE("BucketedAllreduce: misuse is a logic_error - and its hooks go with it") {
  const user_module::Rows batch = user_module::global_batch(2);
  Workers w(1);
  {
    distributed::BucketedAllreduce reduce(w.model.named_parameters(), w.lists());
    CHECK(contains(error_of<std::logic_error>([&] { reduce.finish(); }), "no step begun"));
    reduce.begin(1);
    CHECK(contains(error_of<std::logic_error>([&] { reduce.begin(1); }), "not finished"));
    user_module::shard_loss(w.model, batch, 0, 2).backward();
    CHECK(contains(error_of<std::logic_error>([&] { user_module::shard_loss(w.model, batch, 0, 2).backward(); }),
                   "a second backward of worker 0"));
    reduce.finish();
    CHECK(contains(error_of<std::logic_error>([&] { reduce.begin(2); }), "2 active workers of 1"));
    TwoLayerNet other(1);
    Generator gen(3);
    nn::Linear smaller(4, 2, true, gen, DType::f64);
    CHECK(contains(error_of<std::invalid_argument>([&] {
                     distributed::BucketedAllreduce bad(w.model.named_parameters(), {smaller.named_parameters()});
                   }),
                   "worker 0's parameters differ"));
  }
  // the all-reduce is gone: backward runs no hook of it
  w.model.zero_grad();
  user_module::shard_loss(w.model, batch, 0, 2).backward();
  CHECK(w.model.out->weight.grad().defined());
}

TEST_CASE("shard_of: every row in exactly one shard - sizes differ by at most one - empty shards for tiny batches") {
  for (std::int64_t rows : {1, 2, 5, 64}) {
    for (int size : {1, 2, 3, 7}) {
      CAPTURE(rows);
      CAPTURE(size);
      std::int64_t next = 0, smallest = rows, largest = 0;
      for (int r = 0; r < size; ++r) {
        const train::Shard s = train::shard_of(rows, r, size);
        CHECK(s.first == next);
        next += s.count;
        smallest = std::min(smallest, s.count);
        largest = std::max(largest, s.count);
      }
      CHECK(next == rows);
      CHECK(largest - smallest <= 1);
    }
  }
  CHECK(train::shard_of(5, 0, 2).count == 2);
  CHECK(train::shard_of(5, 1, 2).count == 3);
  CHECK(train::shard_of(1, 0, 2).count == 0);
}

TEST_CASE("checksum: equal for equal values - different after a one-ulp change anywhere") {
  const Tensor t = test_support::randn({5, 7}, 1, DType::f32);
  const std::uint64_t base = distributed::checksum(t);
  CHECK(distributed::checksum(t.clone()) == base);
  CHECK(distributed::checksum(t.transpose(0, 1).transpose(0, 1)) == base);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    Tensor u = t.clone();
    float& x = u.data<float>()[i];
    x = std::nextafter(x, 10.0f);
    CHECK(distributed::checksum(u) != base);
  }
  CHECK(distributed::checksum(t.transpose(0, 1)) != base); // the same bytes in another order
  CHECK(distributed::checksums({{"w", t}}) == std::vector<std::pair<std::string, std::string>>{
                                                  {"w", fmt::format("{:016x}", base)}});
}

TEST_CASE("agree and first_difference in a job of one: exceptions come through as they are - nothing differs") {
  CHECK(error_of<std::invalid_argument>([] { distributed::agree([] { throw std::invalid_argument("--lr bad"); }); }) ==
        "--lr bad");
  int runs = 0;
  distributed::agree([&] { ++runs; });
  CHECK(runs == 1);
  CHECK_FALSE(distributed::first_difference({{"--lr", "0.1"}}).has_value());
  CHECK(distributed::descriptions({{"w", Tensor::zeros({2, 3})}}) ==
        std::vector<std::pair<std::string, std::string>>{{"parameter 0", "'w' [2, 3] float32"}});
}

TEST_CASE("DataParallel and allreduce_gradients in a job of one: the gradients of plain backward") {
  const user_module::Rows batch = user_module::global_batch(5);
  TwoLayerNet plain(100), wrapped(100), simple(100);
  user_module::shard_loss(plain, batch, 0, 5).backward();
  distributed::DataParallel ddp(wrapped, 64);
  ddp.backward(user_module::shard_loss(wrapped, batch, 0, 5));
  check_close(gradients_of(wrapped), gradients_of(plain), 0);
  CHECK(ddp.stats().steps == 1);
  wrapped.zero_grad();
  ddp.backward_without_data();
  for (double g : gradients_of(wrapped)) CHECK(g == 0.0);

  ops::sum(simple.hidden->forward(batch.x)).backward(); // the output layer gets no gradient...
  distributed::allreduce_gradients(simple);
  CHECK(simple.out->weight.grad().to_vector() == std::vector<double>(18, 0.0)); // ...so it gets zeros
}
