// test_reference_mode.cpp - reference mode (runtime::set_reference, HEADGRAD_REFERENCE=1;
// framework/engine/kernels.hpp): the book runs alone. Every kernel entry point lands in the book's
// loop, loops and tasks run on the calling thread in one piece (no OpenMP team, no spin pool),
// storage is plain allocation that the caching allocator never sees, a tensor may be made in one
// mode and die in the other, and every gradient-check row passes with the book's loops.
#include <doctest/doctest.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "framework/checks/registry.hpp"
#include "framework/engine/alloc/caching_allocator.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/runtime/spin_pool.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;

namespace {

// Reference mode on (or off) in a scope, as it was before afterwards.
class ReferenceMode {
public:
  explicit ReferenceMode(bool on) : before_(runtime::reference()) { runtime::set_reference(on); }
  ~ReferenceMode() { runtime::set_reference(before_); }
  ReferenceMode(const ReferenceMode&) = delete;
  ReferenceMode& operator=(const ReferenceMode&) = delete;

private:
  bool before_;
};

// Where parallel_for ran its body: the slices and the threads.
struct Slices {
  std::mutex mu;
  std::vector<std::pair<std::int64_t, std::int64_t>> slices;
  std::set<std::thread::id> threads;
};
void run_loop(Slices& s, std::int64_t n) {
  kernels::parallel_for(n, 8, [&](std::int64_t b, std::int64_t e) {
    std::lock_guard lock(s.mu);
    s.slices.emplace_back(b, e);
    s.threads.insert(std::this_thread::get_id());
  });
}

} // namespace

// (First in the file: the environment's word is what reference() says before any case sets it.)
TEST_CASE("reference mode: HEADGRAD_REFERENCE=1 turns it on from the start (ctest runs this with it set)") {
  const char* env = std::getenv("HEADGRAD_REFERENCE");
  const bool want = env && *env && std::string(env) != "0";
  CHECK(runtime::reference() == want);
}

TEST_CASE("reference mode: every kernel entry point runs the book's loop, and off again the engine's") {
  {
    ReferenceMode on(true);
    const kernels::KernelTable& t = kernels::kernel_table();
#define HEADGRAD_CHECK_BOOK_LOOP(RET, NAME, PARAMS, ARGS)                                                            \
  CHECK_MESSAGE(bool(t.f32.NAME == &book::NAME<float>), #NAME);                                                       \
  CHECK_MESSAGE(bool(t.f64.NAME == &book::NAME<double>), #NAME);
    HEADGRAD_KERNELS(HEADGRAD_CHECK_BOOK_LOOP)
#undef HEADGRAD_CHECK_BOOK_LOOP
    CHECK_FALSE(kernels::flash_attention_pays(4096, 4096, 64)); // the book keeps P, whatever the length
  }
  ReferenceMode off(false);
  CHECK_FALSE(bool(kernels::kernel_table().f32.softmax_forward == &book::softmax_forward<float>));
  CHECK_FALSE(bool(kernels::kernel_table().f64.gemm == &book::gemm<double>));
  CHECK(kernels::flash_attention_pays(4096, 4096, 64));
}

TEST_CASE("reference mode: a loop runs on the calling thread in one piece; off, a large one is split") {
  constexpr std::int64_t n = std::int64_t{1} << 22; // far past the threads' threshold
  {
    ReferenceMode on(true);
    Slices s;
    run_loop(s, n);
    CHECK(s.slices == std::vector<std::pair<std::int64_t, std::int64_t>>{{0, n}});
    CHECK(s.threads == std::set<std::thread::id>{std::this_thread::get_id()});
  }
  ReferenceMode off(false);
  Slices s;
  run_loop(s, n);
  std::int64_t covered = 0;
  for (const auto& [b, e] : s.slices) covered += e - b;
  CHECK(covered == n);
  CHECK(s.slices.size() >= 1); // (one slice per OpenMP thread: more than one where there are several)
}

TEST_CASE("reference mode: tasks stay off the spin pool's workers") {
  runtime::SpinPool pool(1);
  runtime::UsePool use(&pool);
  std::mutex mu;
  std::set<std::thread::id> threads;
  auto run = [&] {
    threads.clear();
    kernels::parallel_tasks(64, std::int64_t{1} << 22, 4, [&](std::int64_t) {
      std::lock_guard lock(mu);
      threads.insert(std::this_thread::get_id());
    });
  };
  {
    ReferenceMode on(true);
    const std::int64_t jobs = pool.jobs();
    run();
    CHECK(pool.jobs() == jobs);
    CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
  }
  ReferenceMode off(false);
  const std::int64_t jobs = pool.jobs();
  run();
  CHECK(pool.jobs() == jobs + 1); // the same tasks, handed to the pool
}

TEST_CASE("reference mode: the caching allocator's statistics do not move while ops run") {
  ReferenceMode on(true);
  const AllocatorStats before = allocator_stats();
  {
    Tensor x = test_support::randn({64, 48}, 1, DType::f32);
    x.set_requires_grad(true);
    const Tensor w = test_support::randn({32, 48}, 2, DType::f32);
    const Tensor y = ops::softmax(ops::linear(x, w, Tensor()));
    ops::sum(ops::mul(y, y)).backward();
    CHECK(x.grad().defined());
  }
  const AllocatorStats after = allocator_stats();
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.bytes_cached == before.bytes_cached);
  CHECK(after.system_allocs == before.system_allocs);
  CHECK(after.cache_hits == before.cache_hits);
}

TEST_CASE("reference mode: a tensor made in one mode may die in the other") {
  std::optional<ReferenceMode> mode(std::in_place, false);
  Tensor fast = Tensor::ones({4096});
  const std::size_t in_use = allocator_stats().bytes_in_use;
  mode.emplace(true);
  Tensor plain = Tensor::ones({4096});
  CHECK(allocator_stats().bytes_in_use == in_use); // not the cache's
  fast = Tensor();                                 // back to the cache it came from
  mode.emplace(false);
  plain = Tensor(); // freed by the system allocator, not handed to the cache
  Tensor again = Tensor::ones({4096});
  CHECK(again.to_vector()[4095] == 1.0);
  mode.reset();
}

TEST_CASE("reference mode: every gradient-check row passes with the book's loops") {
  ReferenceMode on(true);
  const auto rows = checks::gradcheck_cases();
  REQUIRE(!rows.empty());
  int failed = 0;
  for (const auto& c : rows) {
    bool ok = false;
    std::string error;
    try {
      ok = checks::run_gradcheck_case(c).result.ok;
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!ok) {
      ++failed;
      FAIL_CHECK(c.group, " / ", c.name, " (", c.shapes, ") fails in reference mode ", error);
    }
  }
  CHECK(failed == 0);
}
