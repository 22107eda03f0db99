// Tensor basics: factories, views, dtype conversion, printing, determinism.
#include <doctest/doctest.h>

#include "framework/engine/alloc/caching_allocator.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"

using namespace headgrad;

TEST_CASE("tensor: factories and read-out") {
  Tensor z = Tensor::zeros({2, 3});
  CHECK(z.shape() == Dims{2, 3});
  CHECK(z.dtype() == DType::f32);
  for (double v : z.to_vector()) CHECK(v == 0.0);
  CHECK(Tensor::full({2}, 2.5, DType::f64).to_vector() == std::vector<double>{2.5, 2.5});
  CHECK(Tensor::arange(4).to_vector() == std::vector<double>{0, 1, 2, 3});
  CHECK(Tensor::scalar(7).item() == 7.0);
  CHECK_THROWS_AS(Tensor::from({1, 2, 3}, {2, 2}), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::zeros({2}).item(), std::invalid_argument);
  Tensor six = Tensor::zeros({1, 2, 1, 2, 1, 2});
  CHECK(six.dim() == 6);
  CHECK(six.numel() == 8);
}

TEST_CASE("tensor: seeded generators are deterministic") {
  Generator g1(42), g2(42), g3(43);
  auto a = Tensor::normal({100}, 0, 1, g1).to_vector();
  auto b = Tensor::normal({100}, 0, 1, g2).to_vector();
  auto c = Tensor::normal({100}, 0, 1, g3).to_vector();
  CHECK(a == b);
  CHECK(a != c);
  Generator g4(7);
  for (double v : Tensor::uniform({1000}, -0.5, 0.25, g4).to_vector()) {
    CHECK(v >= -0.5);
    CHECK(v < 0.25);
  }
}

TEST_CASE("tensor: views share storage, contiguous copies only when needed") {
  Tensor x = Tensor::from({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor r = x.reshape({3, 2});
  CHECK(r.raw() == x.raw()); // a view
  Tensor t = x.transpose(0, 1);
  CHECK(t.shape() == Dims{3, 2});
  CHECK(!t.is_contiguous());
  CHECK(t.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor tc = t.contiguous();
  CHECK(tc.is_contiguous());
  CHECK(tc.raw() != x.raw());
  CHECK(x.contiguous().raw() == x.raw());
  CHECK(x.slice(1, 1, 3).to_vector() == std::vector<double>{1, 2, 4, 5});
  CHECK(x.reshape({-1}).shape() == Dims{6});
  CHECK_THROWS_AS(x.reshape({4, -1}), std::invalid_argument);
  CHECK_THROWS_AS(t.view({6}), std::invalid_argument);
  CHECK(t.reshape({6}).to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor p = Tensor::arange(24).reshape({2, 3, 4}).permute({2, 0, 1});
  CHECK(p.shape() == Dims{4, 2, 3});
  CHECK(p.to_vector()[1] == 4.0); // p[0,0,1] = x[0,1,0]
}

TEST_CASE("tensor: dtype conversion and printing") {
  Tensor x = Tensor::from({1.5, -2.25}, {2});
  Tensor d = x.to(DType::f64);
  CHECK(d.dtype() == DType::f64);
  CHECK(d.to_vector() == std::vector<double>{1.5, -2.25});
  CHECK(x.to(DType::i64).to_int_vector() == std::vector<std::int64_t>{1, -2});
  const std::string s = fmt::format("{}", x);
  CHECK(s.find("shape=[2]") != std::string::npos);
  CHECK(s.find("float32") != std::string::npos);
  CHECK(s.find("-2.25") != std::string::npos);
}

TEST_CASE("tensor: freed storage is cached for reuse, and allocator_release_cache gives it back") {
  allocator_release_cache();
  CHECK(allocator_stats().bytes_cached == 0);
  { Tensor t = Tensor::zeros({1024}); }
  const AllocatorStats after_free = allocator_stats();
  // Under AddressSanitizer nothing is cached (every block is freed at once), so only check the
  // cache where there is one.
  if (after_free.bytes_cached > 0) {
    CHECK(after_free.bytes_cached >= 1024 * sizeof(float));
    const std::size_t hits = after_free.cache_hits;
    { Tensor again = Tensor::zeros({1024}); }
    CHECK(allocator_stats().cache_hits == hits + 1); // the same block, no system allocation
  }
  allocator_release_cache();
  CHECK(allocator_stats().bytes_cached == 0);
}
