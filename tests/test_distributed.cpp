// framework/distributed in one process (a job of one rank, as every build and every run without
// mpirun is): the shard tree, how ranks hold its nodes, the all-reduce's schedule replayed for
// 1 - 9 ranks with symbolic sums (each element must come out as the tree's sum), the shard sums
// of workers running blocks of shards, the replicas' shared parameters, the gradient-ready hooks
// (when a backward makes a leaf's gradient final), the bucket plan, the bucketed all-reduce's sums
// over thread workers, what it does with unreached parameters, empty shards and misuse, the shards
// of a batch, checksums, and the single-rank forms of agree, first_difference and the DataParallel
// wrapper. The same code over several ranks is tested under mpirun in test_mpi.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <deque>
#include <map>
#include <omp.h>
#include <stdexcept>
#include <string>

#include "framework/core/autograd.hpp"
#include "framework/distributed/bucketed_allreduce.hpp"
#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/distributed/data_parallel.hpp"
#include "framework/distributed/grad_ready_hooks.hpp"
#include "framework/distributed/replica_parameters.hpp"
#include "framework/distributed/shard_gradients.hpp"
#include "framework/distributed/shard_tree.hpp"
#include "framework/distributed/tree_allreduce.hpp"
#include "tests/mpi/user_module.hpp"
#include "tests/test_support.hpp"
#include "train/parallel/rank_shard.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::contains;
using test_support::error_of;
using test_support::gradients_of;
using test_support::leaf;
using user_module::TwoLayerNet;

namespace {

// The model and `n - 1` replicas sharing its values (as train::ThreadReplicas makes them).
struct Workers {
  TwoLayerNet model{100};
  std::vector<std::unique_ptr<TwoLayerNet>> replicas;
  explicit Workers(int n) {
    for (int i = 1; i < n; ++i) {
      replicas.push_back(std::make_unique<TwoLayerNet>(200 + i));
      distributed::share_parameters(replicas.back()->named_parameters(), model.named_parameters());
    }
  }
  TwoLayerNet& worker(int i) { return i == 0 ? model : *replicas[static_cast<std::size_t>(i - 1)]; }
  std::vector<NamedTensors> lists() {
    std::vector<NamedTensors> out{model.named_parameters()};
    for (auto& r : replicas) out.push_back(r->named_parameters());
    return out;
  }
};

using distributed::ShardRange;

// A sum written out, "(a+b)" with the operands in sorted order: floating-point addition is
// commutative, so two sums have the same bits exactly when they add the same pairs - when their
// canonical texts are equal.
std::string add_text(const std::string& a, const std::string& b) { return "(" + std::min(a, b) + "+" + std::max(a, b) + ")"; }

// The tree's sum of shards [first, end) as text, pushed leaf by leaf into a TreeSum.
std::string tree_text(ShardRange node, std::int64_t shards) {
  distributed::TreeSum<std::string> tree(shards);
  for (std::int64_t s = node.first; s < node.end; ++s)
    tree.push({s, s + 1}, std::to_string(s), [](std::string& l, std::string& r) { l = add_text(l, r); });
  return tree.take();
}

// Replays every rank's tree_allreduce_schedule, messages delivered in order per (sender,
// receiver, tag), on `n` elements of text. Returns each rank's elements at the end.
std::vector<std::vector<std::string>> replay_allreduce(std::int64_t shards, int ranks, std::int64_t n) {
  const distributed::RankLayout layout = distributed::rank_layout(shards, ranks);
  std::vector<std::vector<std::string>> data(static_cast<std::size_t>(ranks));
  std::vector<std::vector<distributed::Exchange>> plan;
  for (int r = 0; r < ranks; ++r) {
    data[static_cast<std::size_t>(r)].assign(static_cast<std::size_t>(n), tree_text(layout.nodes[static_cast<std::size_t>(r)], shards));
    plan.push_back(distributed::tree_allreduce_schedule(shards, ranks, r, n));
  }
  std::map<std::tuple<int, int, int>, std::deque<std::vector<std::string>>> wire; // (from, to, tag)
  std::vector<std::size_t> next(static_cast<std::size_t>(ranks), 0);
  std::vector<char> sent(static_cast<std::size_t>(ranks), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < ranks; ++r) {
      auto& i = next[static_cast<std::size_t>(r)];
      if (i == plan[static_cast<std::size_t>(r)].size()) continue;
      const distributed::Exchange& e = plan[static_cast<std::size_t>(r)][i];
      auto& x = data[static_cast<std::size_t>(r)];
      if (!sent[static_cast<std::size_t>(r)] && e.send_end > e.send_first) {
        wire[{r, e.partner, e.tag}].emplace_back(x.begin() + e.send_first, x.begin() + e.send_end);
        moved = true;
      }
      sent[static_cast<std::size_t>(r)] = 1;
      if (e.recv_end > e.recv_first) {
        auto& q = wire[{e.partner, r, e.tag}];
        if (q.empty()) continue; // waits for its partner
        REQUIRE(static_cast<std::int64_t>(q.front().size()) == e.recv_end - e.recv_first);
        for (std::int64_t k = e.recv_first; k < e.recv_end; ++k) {
          const std::string& got = q.front()[static_cast<std::size_t>(k - e.recv_first)];
          x[static_cast<std::size_t>(k)] = e.add ? add_text(x[static_cast<std::size_t>(k)], got) : got;
        }
        q.pop_front();
      }
      ++i;
      sent[static_cast<std::size_t>(r)] = 0;
      moved = true;
    }
  }
  for (int r = 0; r < ranks; ++r) REQUIRE(next[static_cast<std::size_t>(r)] == plan[static_cast<std::size_t>(r)].size()); // no deadlock
  for (const auto& [key, q] : wire) REQUIRE(q.empty()); // every message taken
  return data;
}

} // namespace

TEST_CASE("shard tree: splits left-heavy - nodes and siblings - the levels of 5 and 6 shards") {
  CHECK(distributed::tree_split(0, 5) == 3);
  CHECK(distributed::tree_split(3, 5) == 4);
  CHECK(distributed::is_tree_node({0, 5}, 5));
  CHECK(distributed::is_tree_node({0, 3}, 5));
  CHECK(distributed::is_tree_node({2, 3}, 5));
  CHECK_FALSE(distributed::is_tree_node({2, 4}, 5)); // straddles 0..3 | 3..5
  CHECK_FALSE(distributed::is_tree_node({1, 3}, 5)); // 0..3 splits at 2
  CHECK(distributed::tree_siblings({0, 2}, {2, 3}, 5));
  CHECK_FALSE(distributed::tree_siblings({2, 3}, {3, 4}, 5)); // adjacent, split matches, but 2..4 is no node
  using Nodes = std::vector<ShardRange>;
  CHECK(distributed::tree_nodes_at_depth(5, 2) == Nodes{{0, 2}, {2, 3}, {3, 4}, {4, 5}});
  CHECK(distributed::tree_nodes_at_depth(6, 2) == Nodes{{0, 2}, {2, 3}, {3, 5}, {5, 6}});
  CHECK_THROWS_AS(distributed::tree_nodes_at_depth(3, 2), std::invalid_argument);
  CHECK(tree_text({0, 5}, 5) == "(((0+1)+2)+(3+4))");
  CHECK(tree_text({0, 4}, 4) == "((0+1)+(2+3))");
  // the shards' rows: sizes differ by at most one
  CHECK(distributed::shard_rows(5, 4, 0) == ShardRange{0, 1});
  CHECK(distributed::shard_rows(5, 4, 3) == ShardRange{3, 5});
}

TEST_CASE("TreeSum: any grouping of the leaves into consecutive blocks gives the tree's additions") {
  auto add = [](std::string& l, std::string& r) { l = add_text(l, r); };
  for (std::int64_t S : {1, 2, 3, 5, 8, 13}) {
    const std::string want = tree_text({0, S}, S);
    for (int workers = 1; workers <= S; ++workers) {
      CAPTURE(S);
      CAPTURE(workers);
      // each worker adds its block's leaves, then the blocks' partial sums are pushed in order
      distributed::TreeSum<std::string> all(S);
      for (int w = 0; w < workers; ++w) {
        const ShardRange block = distributed::worker_shards({0, S}, workers, w);
        distributed::TreeSum<std::string> mine(S);
        for (std::int64_t s = block.first; s < block.end; ++s) mine.push({s, s + 1}, std::to_string(s), add);
        for (auto& [range, text] : mine.pending()) all.push(range, text, add);
      }
      CHECK(all.take() == want);
    }
  }
  distributed::TreeSum<std::string> gap(4);
  gap.push({0, 1}, "0", add);
  CHECK_THROWS_AS(gap.push({2, 3}, "2", add), std::logic_error);
  gap.push({1, 2}, "1", add);
  gap.push({2, 3}, "2", add);
  CHECK(gap.pending().size() == 2); // (0+1) and 2: no node yet
  CHECK_THROWS_AS(gap.take(), std::logic_error);
}

TEST_CASE("rank_layout: every rank a nonempty node - in order - Rabenseifner's pairs - balanced for powers of two") {
  for (std::int64_t S = 1; S <= 40; ++S) {
    for (int N = 1; N <= std::min<std::int64_t>(S, 20); ++N) {
      CAPTURE(S);
      CAPTURE(N);
      const distributed::RankLayout l = distributed::rank_layout(S, N);
      REQUIRE(l.nodes.size() == static_cast<std::size_t>(N));
      CHECK(l.pow2 <= N);
      CHECK(2 * l.pow2 > N);
      std::int64_t next = 0, smallest = S, largest = 0;
      for (int r = 0; r < N; ++r) {
        const ShardRange n = l.nodes[static_cast<std::size_t>(r)];
        CHECK(n.first == next);
        CHECK(n.count() >= 1);
        CHECK(distributed::is_tree_node(n, S));
        next = n.end;
        smallest = std::min(smallest, n.count());
        largest = std::max(largest, n.count());
        const int pair = l.pair[static_cast<std::size_t>(r)];
        if (pair >= 0) {
          CHECK(l.pair[static_cast<std::size_t>(pair)] == r);
          CHECK(std::abs(pair - r) == 1);
          CHECK(l.virtual_rank[static_cast<std::size_t>(pair)] == l.virtual_rank[static_cast<std::size_t>(r)]);
        }
        CHECK(l.participant[static_cast<std::size_t>(l.virtual_rank[static_cast<std::size_t>(r)])] == std::min(r, pair < 0 ? r : pair));
      }
      CHECK(next == S);
      if (N == l.pow2) CHECK(largest - smallest <= 1);
    }
  }
  // one shard per rank (DataParallel): rank r holds shard r
  for (int N = 1; N <= 12; ++N)
    for (int r = 0; r < N; ++r) CHECK(distributed::rank_shards(N, N, r) == ShardRange{r, r + 1});
  CHECK_THROWS_AS(distributed::rank_layout(3, 4), std::invalid_argument);
}

TEST_CASE("tree_allreduce_schedule replayed: every element of every rank is the tree's sum over all shards") {
  for (std::int64_t S : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 23}) {
    for (int N = 1; N <= std::min<std::int64_t>(S, 9); ++N) {
      for (std::int64_t n : {1, 3, 16, 37}) {
        CAPTURE(S);
        CAPTURE(N);
        CAPTURE(n);
        const std::string want = tree_text({0, S}, S);
        for (const auto& rank : replay_allreduce(S, N, n))
          for (const std::string& x : rank) CHECK(x == want);
      }
    }
  }
  // about 2n elements sent per rank of a power-of-two job (reduce-scatter + all-gather)
  for (int N : {2, 4, 8}) {
    std::int64_t sent = 0;
    for (const auto& e : distributed::tree_allreduce_schedule(N, N, 0, 1024)) sent += e.send_end - e.send_first;
    CHECK(sent == 2 * (1024 - 1024 / N));
  }
}

TEST_CASE("ShardGradients: shards run by 1 - 2 - 3 or 5 workers in blocks give the tree's sum bit for bit") {
  const std::int64_t S = 5, rows = 7;
  const user_module::Rows batch = user_module::global_batch(rows);
  // the tree's sum by hand: (((g0 + g1) + g2) + (g3 + g4)), each g one shard's gradient
  std::vector<std::vector<double>> g;
  for (std::int64_t s = 0; s < S; ++s) {
    TwoLayerNet net(100);
    const ShardRange r = distributed::shard_rows(rows, S, s);
    user_module::shard_loss(net, batch, r.first, r.count()).backward();
    g.push_back(gradients_of(net));
  }
  auto plus = [](std::vector<double> a, const std::vector<double>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
  };
  const std::vector<double> want = plus(plus(plus(g[0], g[1]), g[2]), plus(g[3], g[4]));
  CHECK(want != plus(plus(plus(plus(g[0], g[1]), g[2]), g[3]), g[4])); // the order shows in the bits here
  for (int workers : {1, 2, 3, 5}) {
    CAPTURE(workers);
    Workers w(workers);
    distributed::ShardGradients sums(S, w.lists());
    std::vector<ShardRange> blocks;
    for (int i = 0; i < workers; ++i) blocks.push_back(distributed::worker_shards({0, S}, workers, i));
    sums.begin(blocks);
    for (int i = 0; i < workers; ++i) // one worker after the other: the sums do not depend on timing
      for (std::int64_t s = blocks[static_cast<std::size_t>(i)].first; s < blocks[static_cast<std::size_t>(i)].end; ++s) {
        const ShardRange r = distributed::shard_rows(rows, S, s);
        user_module::shard_loss(w.worker(i), batch, r.first, r.count()).backward();
        if (s + 1 < blocks[static_cast<std::size_t>(i)].end) sums.keep(i);
      }
    CHECK(sums.at_last_shard(0));
    std::vector<double> got;
    for (std::size_t p = 0; p < sums.parameter_count(); ++p) {
      const auto v = sums.sum(p).to_vector();
      got.insert(got.end(), v.begin(), v.end());
    }
    CHECK(got == want);
    sums.end();
    for (int i = 0; i < workers; ++i)
      for (const auto& [name, p] : w.worker(i).named_parameters()) CHECK_FALSE(p.grad().defined());
    CHECK_THROWS_AS(sums.keep(0), std::logic_error); // no step begun
  }
}

TEST_CASE("add_shard_gradient: a shard that did not reach a parameter adds +0 - none reached it: no gradient") {
  Tensor a = Tensor::from(std::vector<double>{-0.0, 1.5}, {2}, DType::f64), none;
  distributed::add_shard_gradient(none, a); // (no gradient) + a = a + 0: the -0 becomes +0
  REQUIRE(none.defined());
  CHECK_FALSE(std::signbit(none.to_vector()[0]));
  CHECK(none.to_vector()[1] == 1.5);
  Tensor b = Tensor::from(std::vector<double>{-0.0, 2}, {2}, DType::f64), c;
  distributed::add_shard_gradient(b, c);
  CHECK_FALSE(std::signbit(b.to_vector()[0]));
  Tensor d, e;
  distributed::add_shard_gradient(d, e);
  CHECK_FALSE(d.defined());
}

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

TEST_CASE("share_parameters: a replica reads the source's values and keeps its own gradients") {
  const user_module::Rows batch = user_module::global_batch(5);
  TwoLayerNet source(1), replica(2);
  distributed::share_parameters(replica.named_parameters(), source.named_parameters());
  CHECK(replica.forward(batch.x).to_vector() == source.forward(batch.x).to_vector());
  // a backward through the replica fills the replica's gradients only
  ops::sum(replica.forward(batch.x)).backward();
  for (const auto& [name, p] : source.named_parameters()) CHECK_MESSAGE(!p.grad().defined(), name);
  for (const auto& [name, p] : replica.named_parameters()) CHECK_MESSAGE(p.grad().defined(), name);
  // an update of the source's values (in place, as an optimizer does) is the replica's too
  source.named_parameters()[0].second.data<double>()[0] += 1.0;
  CHECK(replica.named_parameters()[0].second.to_vector()[0] == source.named_parameters()[0].second.to_vector()[0]);
  CHECK(replica.forward(batch.x).to_vector() == source.forward(batch.x).to_vector());
  // take_gradients_from: taken over where the source has none, added where it has one; the replica's dropped
  replica.zero_grad();
  ops::sum(replica.forward(batch.x)).backward();
  const std::vector<double> once = gradients_of(replica);
  distributed::take_gradients_from(source.named_parameters(), replica.named_parameters());
  CHECK(gradients_of(source) == once);
  for (const auto& [name, p] : replica.named_parameters()) CHECK_MESSAGE(!p.grad().defined(), name);
  ops::sum(replica.forward(batch.x)).backward();
  distributed::take_gradients_from(source.named_parameters(), replica.named_parameters());
  std::vector<double> twice = once;
  for (double& g : twice) g *= 2;
  CHECK(gradients_of(source) == twice);
  // a different model is refused
  Generator gen(3);
  nn::Linear other(4, 2, true, gen, DType::f64);
  for (const char* op : {"share_parameters", "take_gradients_from"})
    CHECK(contains(error_of<std::invalid_argument>([&] {
                     if (op == std::string("share_parameters"))
                       distributed::share_parameters(other.named_parameters(), source.named_parameters());
                     else distributed::take_gradients_from(other.named_parameters(), source.named_parameters());
                   }),
                   std::string(op) + ": the modules differ (2 and 4 parameters"));
}

// ---- gradient-ready hooks (grad_ready_hooks.hpp) ------------------------------------------------

namespace {
// y = x, with a backward that logs its run to `events`: shows when in the walk a hook ran.
Tensor logged_identity(const Tensor& x, std::vector<std::string>& events) {
  return record(x.detach(), "logged_identity", {x}, [&events](Node& n, const Tensor& dy) {
    events.push_back("identity backward");
    n.add_to_grad(0, dy);
  });
}
} // namespace

TEST_CASE("grad-ready hooks: a grad-ready hook runs right after its leaf's last writer - with the final gradient") {
  // y = sum(w2 * identity(w1 * x)): the engine reaches w2's only writer (the outer mul) before the
  // logged identity, and w1's after it. w2 is the mul's first input, so a depth-first walk meets
  // w2 before everything below the identity - the hook must not wait for w2's place in the order.
  Tensor x = Tensor::from({1, 2, 3}, {3}, DType::f64);
  Tensor w1 = leaf({0.5, -1, 2}, {3}), w2 = leaf({3, 1, -2}, {3});
  std::vector<std::string> events;
  std::vector<double> w1_at_hook, w2_at_hook;
  distributed::set_grad_ready_hook(w1, [&] {
    events.push_back("w1 ready");
    w1_at_hook = w1.grad().to_vector();
  });
  distributed::set_grad_ready_hook(w2, [&] {
    events.push_back("w2 ready");
    w2_at_hook = w2.grad().to_vector();
  });
  ops::sum(ops::mul(w2, logged_identity(ops::mul(w1, x), events))).backward();
  CHECK(events == std::vector<std::string>{"w2 ready", "identity backward", "w1 ready"});
  check_close(w1_at_hook, {3, 2, -6});   // dy/dw1 = w2 * x
  check_close(w2_at_hook, {0.5, -2, 6}); // dy/dw2 = w1 * x
  check_close(w1.grad().to_vector(), w1_at_hook);

  // every backward runs it again (gradients accumulate; the hook sees the sum so far)
  events.clear();
  ops::sum(ops::mul_scalar(w1, 2.0)).backward();
  CHECK(events == std::vector<std::string>{"w1 ready"});
  check_close(w1_at_hook, {5, 4, -4});
  // removed: not called any more
  distributed::set_grad_ready_hook(w1, {});
  distributed::set_grad_ready_hook(w2, nullptr);
  events.clear();
  ops::sum(ops::mul(w1, w2)).backward();
  CHECK(events.empty());
}

TEST_CASE("grad-ready hooks: a leaf several nodes write into gets its hook once - after all of them") {
  Tensor w = leaf({1, -2}, {2});
  int calls = 0;
  std::vector<double> at_hook;
  distributed::set_grad_ready_hook(w, [&] {
    ++calls;
    at_hook = w.grad().to_vector();
  });
  SUBCASE("three writers: w * a, w * b and exp(w)") {
    Tensor a = Tensor::from({2, 3}, {2}, DType::f64), b = Tensor::from({-1, 5}, {2}, DType::f64);
    ops::sum(ops::add(ops::add(ops::mul(w, a), ops::mul(w, b)), ops::exp(w))).backward();
    CHECK(calls == 1);
    check_close(at_hook, {2 - 1 + std::exp(1.0), 3 + 5 + std::exp(-2.0)}, 1e-12);
  }
  SUBCASE("one node reading w twice (w * w)") {
    ops::sum(ops::mul(w, w)).backward();
    CHECK(calls == 1);
    check_close(at_hook, {2, -4});
  }
  SUBCASE("w as the root: nothing but the seed writes into it") {
    w.backward(Tensor::from({0.25, 4}, {2}, DType::f64));
    CHECK(calls == 1);
    check_close(at_hook, {0.25, 4});
  }
  SUBCASE("retain_graph: once per backward") {
    Tensor y = ops::sum(ops::mul(w, w));
    y.backward(/*retain_graph=*/true);
    y.backward();
    CHECK(calls == 2);
    check_close(at_hook, {4, -8});
  }
}

TEST_CASE("grad-ready hooks: set_grad_ready_hook refuses a tensor an op made - and an exception from a hook ends backward") {
  Tensor w = leaf({1, 2}, {2});
  Tensor y = ops::mul_scalar(w, 2.0);
  CHECK(contains(error_of<std::logic_error>([&] { distributed::set_grad_ready_hook(y, [] {}); }), "not a leaf"));
  CHECK(contains(error_of<std::logic_error>([&] { distributed::set_grad_ready_hook(Tensor(), [] {}); }), "undefined"));
  distributed::set_grad_ready_hook(w, [] { throw std::runtime_error("hook failed"); });
  CHECK(error_of<std::runtime_error>([&] { ops::sum(y).backward(); }) == "hook failed");
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
  for (int i = 1; i < 3; ++i)
    distributed::take_gradients_from(added.model.named_parameters(), added.worker(i).named_parameters());
  CHECK(gradients_of(w.model) == gradients_of(added.model));

  const distributed::CommStats& s = reduce.stats();
  CHECK(s.steps == 2);
  CHECK(s.buckets == 4);
  CHECK(s.bytes == 2 * (w.model.num_parameters() + 4) * 8); // the gradients and a flag per parameter
  CHECK(s.comm_seconds >= 0);
  CHECK(s.overlapped_seconds <= s.comm_seconds);
  omp_set_num_threads(before);
}

TEST_CASE("BucketedAllreduce: workers run blocks of shards - equal to ShardGradients bit for bit - unreached parameters") {
  const user_module::Rows batch = user_module::global_batch(7);
  auto shard = [&](TwoLayerNet& net, std::int64_t s, std::int64_t S) {
    const ShardRange r = distributed::shard_rows(7, S, s);
    return user_module::shard_loss(net, batch, r.first, r.count());
  };
  SUBCASE("5 shards over 2 workers, one after the other: the same bits as 5 workers") {
    Workers two(2), five(5);
    distributed::BucketedAllreduce reduce(two.model.named_parameters(), two.lists(), 64, /*shards=*/5);
    CHECK(reduce.rank_shards() == ShardRange{0, 5});
    CHECK(reduce.max_active() == 2);
    reduce.begin(2);
    CHECK(reduce.worker_block(1) == ShardRange{2, 5});
#pragma omp parallel num_threads(2)
    {
      const int i = omp_get_thread_num();
      const ShardRange block = reduce.worker_block(i);
      for (std::int64_t s = block.first; s < block.end; ++s) {
        shard(two.worker(i), s, 5).backward();
        if (s + 1 < block.end) reduce.keep(i);
      }
    }
    reduce.finish();
    for (int i = 0; i < 5; ++i) shard(five.worker(i), i, 5).backward();
    std::vector<NamedTensors> lists = five.lists();
    distributed::ShardGradients sums(5, lists);
    std::vector<ShardRange> blocks;
    for (std::int64_t s = 0; s < 5; ++s) blocks.push_back({s, s + 1});
    sums.begin(blocks);
    std::vector<double> want;
    for (std::size_t p = 0; p < sums.parameter_count(); ++p) {
      const auto v = sums.sum(p).to_vector();
      want.insert(want.end(), v.begin(), v.end());
    }
    CHECK(gradients_of(two.model) == want);
  }
  SUBCASE("one shard for two workers: the second adds nothing, its gradient is dropped") {
    Workers w(2);
    distributed::BucketedAllreduce reduce(w.model.named_parameters(), w.lists(), 64, /*shards=*/1);
    CHECK(reduce.max_active() == 1);
    TwoLayerNet alone(100);
    user_module::shard_loss(alone, batch, 0, 7).backward();
    reduce.begin(1);
    user_module::shard_loss(w.worker(0), batch, 0, 7).backward();
    user_module::shard_loss(w.worker(1), batch, 0, 7).backward(); // not in this step
    reduce.finish();
    check_close(gradients_of(w.model), gradients_of(alone), 0);
    CHECK_FALSE(w.worker(1).hidden->weight.grad().defined());
  }
  SUBCASE("a parameter one shard reached gets its gradient (the other adds zeros); none reached: no gradient") {
    Workers w(2);
    distributed::BucketedAllreduce reduce(w.model.named_parameters(), w.lists(), 64);
    reduce.begin(2);
    ops::sum(w.worker(0).forward(batch.x)).backward();         // reaches every parameter
    ops::sum(w.worker(1).hidden->forward(batch.x)).backward(); // not the output layer
    reduce.finish();
    TwoLayerNet one(100);
    ops::sum(one.forward(batch.x)).backward();
    CHECK(w.model.out->weight.grad().to_vector() == one.out->weight.grad().to_vector());
    CHECK(w.model.hidden->bias.grad().defined());
    w.model.zero_grad(); // (as train_step does before every step)
    reduce.begin(2);
    ops::sum(w.worker(0).hidden->forward(batch.x)).backward();
    ops::sum(w.worker(1).hidden->forward(batch.x)).backward();
    reduce.finish();
    CHECK_FALSE(w.model.out->weight.grad().defined());
    CHECK_FALSE(w.model.out->bias.grad().defined());
    CHECK(w.model.hidden->bias.grad().to_vector() == std::vector<double>(6, 14.0)); // 2 workers x 7 rows
  }
  SUBCASE("no active worker (a rank without rows): no gradients") {
    Workers w(2);
    distributed::BucketedAllreduce reduce(w.model.named_parameters(), w.lists(), 64);
    reduce.begin(0);
    reduce.finish();
    for (const auto& [name, p] : w.model.named_parameters()) CHECK_FALSE(p.grad().defined());
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
    CHECK(contains(error_of<std::invalid_argument>([&] {
                     distributed::BucketedAllreduce bad(w.model.named_parameters(), w.lists(), 64, /*shards=*/-1);
                   }),
                   "-1 shards over 1 ranks"));
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
  ddp.backward_without_data(); // no rank's backward reached anything: no gradients, as no backward
  for (const auto& [name, p] : wrapped.named_parameters()) CHECK_FALSE(p.grad().defined());

  ops::sum(simple.hidden->forward(batch.x)).backward(); // the output layer gets no gradient...
  distributed::allreduce_gradients(simple);
  CHECK_FALSE(simple.out->weight.grad().defined()); // ...on any rank: it keeps none
  CHECK(simple.hidden->weight.grad().defined());
}
