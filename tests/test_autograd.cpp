// Contract tests for the tape (framework/core/autograd.hpp): accumulation, reuse, errors, no_grad,
// detach, explicit upstream gradients, long chains, freeing the graph, and watching a backward.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/checks/registry.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::check_close;
using test_support::contains;
using test_support::error_of;
using test_support::leaf;
using test_support::randn;

TEST_CASE("autograd: gradients accumulate across backward() calls until zero_grad()") {
  Tensor x = leaf({1, 2, 3}, {3});
  CHECK_FALSE(x.grad().defined());
  ops::sum(ops::mul(x, x)).backward(); // d/dx sum x^2 = 2x
  check_close(x.grad().to_vector(), {2, 4, 6});
  ops::sum(ops::mul_scalar(x, 3.0)).backward(); // a fresh graph: + 3
  check_close(x.grad().to_vector(), {5, 7, 9});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  ops::sum(x).backward();
  check_close(x.grad().to_vector(), {1, 1, 1});
  // the gradient buffer is contiguous, in x's shape and dtype
  CHECK(x.grad().shape() == x.shape());
  CHECK(x.grad().dtype() == DType::f64);
  CHECK(x.grad().is_contiguous());
  CHECK_FALSE(x.grad().requires_grad());
}

TEST_CASE("autograd: a node used twice gets both contributions") {
  SUBCASE("y = x*x + x") {
    Tensor x = leaf({-1.5, 0.5, 2}, {3});
    ops::sum(ops::add(ops::mul(x, x), x)).backward(); // 2x + 1
    check_close(x.grad().to_vector(), {-2, 2, 5});
  }
  SUBCASE("diamond: a = exp(x); b = 2a; c = 3a; d = b * c") {
    Tensor x = leaf({0.1, -0.3}, {2});
    Tensor a = ops::exp(x);
    Tensor d = ops::mul(ops::mul_scalar(a, 2.0), ops::mul_scalar(a, 3.0)); // 6 e^{2x}
    ops::sum(d).backward();
    check_close(x.grad().to_vector(), {12 * std::exp(0.2), 12 * std::exp(-0.6)});
  }
  SUBCASE("an intermediate consumed by three ops, one of them a view") {
    Tensor x = leaf({1, 2, 3, 4}, {2, 2});
    Tensor h = ops::mul_scalar(x, 2.0);
    Tensor y = ops::add(ops::add(h, ops::transpose(h, 0, 1)), ops::neg(h)); // h^T
    ops::sum(y).backward();
    check_close(x.grad().to_vector(), {2, 2, 2, 2});
  }
  // add and reshape hand their output gradient's buffer to an input without copying
  // (Node::add_to_grad); these shapes make a second contribution land in that shared buffer.
  SUBCASE("x + x: the second operand must not alias the first's adopted buffer") {
    Tensor x = leaf({1, -2, 3}, {3});
    Tensor y = ops::add(x, x);
    ops::sum(ops::mul(y, Tensor::from({1, 10, 100}, {3}, DType::f64))).backward();
    check_close(x.grad().to_vector(), {2, 20, 200});
  }
  SUBCASE("residual h + relu(h): relu accumulates into the buffer add handed to h") {
    Tensor x = leaf({-1, 2}, {2});
    Tensor h = ops::mul_scalar(x, 3.0);
    Tensor y = ops::add(h, ops::relu(h));
    ops::sum(ops::mul(y, Tensor::from({5, 7}, {2}, DType::f64))).backward();
    check_close(x.grad().to_vector(), {15, 42}); // 3 * (1 + relu'(h)) * upstream
  }
  SUBCASE("reshape adopting, then a second consumer of the same tensor") {
    Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor h = ops::mul_scalar(x, 1.0);
    Tensor y = ops::add(ops::mul(ops::reshape(h, {3, 2}), ops::reshape(h, {3, 2})), ops::reshape(h, {6, 1}).reshape({3, 2}));
    ops::sum(y).backward(); // 2h + 1
    check_close(x.grad().to_vector(), {3, 5, 7, 9, 11, 13});
  }
  SUBCASE("a leaf's adopted gradient keeps accumulating over two backwards") {
    Tensor x = leaf({1, 2}, {2});
    ops::sum(ops::reshape(x, {2, 1})).backward();
    ops::sum(ops::mul_scalar(ops::reshape(x, {1, 2}), 3.0)).backward();
    check_close(x.grad().to_vector(), {4, 4});
  }
  SUBCASE("concat of the same tensor with itself") {
    Tensor x = leaf({1, 2}, {2});
    ops::sum(ops::mul(ops::concat({x, x, x}, 0), ops::concat({x, x, x}, 0))).backward(); // 3 * 2x
    check_close(x.grad().to_vector(), {6, 12});
  }
}

namespace {
const void* storage_of(const Tensor& t) { return t.impl()->storage.get(); }
// An op y = x0 + x1 (same shapes) whose backward is `backward`: to watch add_to_grad's choices.
Tensor probe_add(const Tensor& a, const Tensor& b, BackwardFn backward) {
  Tensor y;
  {
    NoGradGuard ng;
    y = ops::add(a, b);
  }
  return record(y, "probe_add", {a, b}, std::move(backward));
}
} // namespace

TEST_CASE("autograd: add_to_grad hands dy's buffer to one input only, and a temporary only if given up") {
  SUBCASE("dy goes to the first input; the second gets a copy, not the same storage") {
    Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
    const void* dy_storage = nullptr;
    Tensor y = probe_add(a, b, [&](Node& n, const Tensor& dy) {
      dy_storage = storage_of(dy);
      n.add_to_grad(0, dy);
      n.add_to_grad(1, dy);
    });
    y.backward(Tensor::from({1, 1}, {2}, DType::f64));
    CHECK(storage_of(a.grad()) == dy_storage);
    CHECK(storage_of(b.grad()) != dy_storage);
    ops::sum(ops::mul_scalar(a, 5.0)).backward(); // a's (handed-on) buffer keeps adding up
    check_close(a.grad().to_vector(), {6, 6});
    check_close(b.grad().to_vector(), {1, 1});
  }
  SUBCASE("a temporary given as an rvalue becomes the gradient; a kept tensor is copied") {
    Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
    Tensor kept = Tensor::from({7, 8}, {2}, DType::f64);
    const void* temp_storage = nullptr;
    Tensor y = probe_add(a, b, [&](Node& n, const Tensor& dy) {
      Tensor t = dy * 2.0;
      temp_storage = storage_of(t);
      n.add_to_grad(0, std::move(t));
      n.add_to_grad(1, kept);
    });
    y.backward(Tensor::from({1, 1}, {2}, DType::f64));
    CHECK(storage_of(a.grad()) == temp_storage);
    CHECK(storage_of(b.grad()) != storage_of(kept));
    ops::sum(b).backward(); // adding to b's gradient must leave `kept` alone
    check_close(kept.to_vector(), {7, 8});
    check_close(b.grad().to_vector(), {8, 9});
  }
  SUBCASE("grad_buffer: the first call is a first write, the second (same tensor) is not") {
    Tensor x = leaf({1, 2}, {2});
    bool first0 = false, first1 = true;
    Tensor y = probe_add(x, x, [&](Node& n, const Tensor&) {
      const GradBuffer g0 = n.grad_buffer(0);
      first0 = g0.first_write;
      std::fill(g0.data<double>(), g0.data<double>() + 2, 1.0);
      const GradBuffer g1 = n.grad_buffer(1);
      first1 = g1.first_write;
      for (int i = 0; i < 2; ++i) g1.data<double>()[i] += 1.0;
    });
    y.backward(Tensor::from({1, 1}, {2}, DType::f64));
    CHECK(first0);
    CHECK_FALSE(first1);
    check_close(x.grad().to_vector(), {2, 2});
  }
}

TEST_CASE("autograd: overwritable_dy is dy's own buffer when nothing else holds dy, else a fresh one") {
  SUBCASE("dy held by the engine alone: its buffer, which then is not handed on as dy") {
    Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
    const void* dy_storage = nullptr;
    const void* dz_storage = nullptr;
    Tensor y = probe_add(a, b, [&](Node& n, const Tensor& dy) {
      dy_storage = storage_of(dy);
      const Tensor dz = n.overwritable_dy(dy);
      dz_storage = storage_of(dz);
      for (int i = 0; i < 2; ++i) dz.data<double>()[i] = 3.0 * dy.data<double>()[i];
      n.add_to_grad(0, dz); // dz is dy's buffer, overwritten: copied, not handed on
      n.add_to_grad(1, dz);
    });
    y.backward(Tensor::from({1, 2}, {2}, DType::f64));
    CHECK(dz_storage == dy_storage);
    CHECK(storage_of(a.grad()) != dy_storage);
    CHECK(storage_of(b.grad()) != dy_storage);
    check_close(a.grad().to_vector(), {3, 6});
    check_close(b.grad().to_vector(), {3, 6});
  }
  SUBCASE("dy held elsewhere too: a fresh buffer, dy untouched") {
    Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
    Tensor held;
    bool fresh = false;
    Tensor y = probe_add(a, b, [&](Node& n, const Tensor& dy) {
      held = dy; // someone else keeps dy (as an observer could)
      const Tensor dz = n.overwritable_dy(dy);
      fresh = storage_of(dz) != storage_of(dy);
      for (int i = 0; i < 2; ++i) dz.data<double>()[i] = 3.0 * dy.data<double>()[i];
      n.add_to_grad(0, dz);
      n.add_to_grad(1, dy);
    });
    y.backward(Tensor::from({1, 2}, {2}, DType::f64));
    CHECK(fresh);
    check_close(held.to_vector(), {1, 2});
    check_close(a.grad().to_vector(), {3, 6});
    check_close(b.grad().to_vector(), {1, 2});
  }
}

TEST_CASE("autograd: backward on a tensor that needs no grad throws logic_error saying what to do") {
  Tensor x = Tensor::from({1, 2}, {2}, DType::f64);
  Tensor y = ops::sum(ops::mul(x, x));
  CHECK_FALSE(y.requires_grad());
  CHECK_THROWS_AS(y.backward(), std::logic_error);
  const std::string msg = error_of([&] { y.backward(); });
  CHECK(contains(msg, "does not require grad"));
  CHECK(contains(msg, "set_requires_grad"));
  // and a non-scalar without an upstream gradient
  Tensor z = ops::mul_scalar(leaf({1, 2}, {2}), 2.0);
  const std::string msg2 = error_of([&] { z.backward(); });
  CHECK(contains(msg2, "[2]"));
  CHECK(contains(msg2, "backward(grad)"));
  CHECK_THROWS_AS(z.backward(), std::logic_error);
  // integer tensors cannot require grad; non-leaves cannot change requires_grad
  Tensor i = Tensor::from_ints({1, 2}, {2});
  CHECK_THROWS_AS(i.set_requires_grad(true), std::invalid_argument);
  CHECK_THROWS_AS(z.set_requires_grad(false), std::logic_error);
}

TEST_CASE("autograd: backward twice on one graph needs retain_graph") {
  Tensor x = leaf({1, 2, 3}, {3});
  SUBCASE("without retain_graph the second call throws, naming retain_graph") {
    Tensor y = ops::sum(ops::exp(x));
    y.backward();
    const auto g1 = x.grad().to_vector();
    CHECK_THROWS_AS(y.backward(), std::logic_error);
    CHECK(contains(error_of([&] { y.backward(); }), "retain_graph"));
    check_close(x.grad().to_vector(), g1); // the failed call changed nothing
  }
  SUBCASE("an intermediate of a freed graph throws too") {
    Tensor h = ops::exp(x);
    Tensor y = ops::sum(ops::mul(h, h));
    y.backward();
    Tensor y2 = ops::sum(h); // new root, but h's node was freed by the first backward
    CHECK_THROWS_AS(y2.backward(), std::logic_error);
    CHECK(contains(error_of([&] { y2.backward(); }), "retain_graph"));
  }
  SUBCASE("with retain_graph=true the second call works and gradients double") {
    Tensor y = ops::sum(ops::mul(ops::exp(x), x)); // d/dx x e^x = (1 + x) e^x
    y.backward(/*retain_graph=*/true);
    const auto g1 = x.grad().to_vector();
    check_close(g1, {2 * std::exp(1.0), 3 * std::exp(2.0), 4 * std::exp(3.0)});
    y.backward();
    check_close(x.grad().to_vector(), {2 * g1[0], 2 * g1[1], 2 * g1[2]});
    CHECK_THROWS_AS(y.backward(), std::logic_error); // the second call did not retain
  }
}

TEST_CASE("autograd: NoGradGuard records nothing") {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard ng;
    CHECK_FALSE(grad_enabled());
    Tensor y = ops::exp(ops::mul(x, x));
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf()); // no grad_fn
    CHECK(y.impl()->grad_fn == nullptr);
    Tensor z = ops::matmul(ops::reshape(x, {1, 2}), ops::reshape(x, {2, 1}));
    CHECK_FALSE(z.requires_grad());
    {
      NoGradGuard nested;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled()); // the nested guard restored "off", not "on"
    CHECK_THROWS_AS(ops::sum(y).backward(), std::logic_error);
  }
  CHECK(grad_enabled());
  Tensor y = ops::exp(x);
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  CHECK_FALSE(x.grad().defined()); // nothing reached x
}

TEST_CASE("autograd: detach() cuts the graph and shares data") {
  Tensor x = leaf({0.5, 1.5}, {2});
  Tensor e = ops::exp(x);
  Tensor d = e.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.raw() == e.raw());
  ops::sum(ops::mul(d, x)).backward(); // d/dx (stop_grad(e^x) * x) = e^x, not (1 + x) e^x
  check_close(x.grad().to_vector(), {std::exp(0.5), std::exp(1.5)});
}

TEST_CASE("autograd: backward with an explicit upstream gradient") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = ops::mul(x, x); // (2, 3), not a scalar
  y.backward(Tensor::from({1, 0, -1, 2, 0.5, 0}, {2, 3}, DType::f64), true);
  check_close(x.grad().to_vector(), {2, 0, -6, 16, 5, 0}); // 2 x g
  // a non-contiguous upstream gradient is read in logical order
  x.zero_grad();
  Tensor g = Tensor::from({1, 2, 0, 0, 0, 0}, {3, 2}, DType::f64).transpose(0, 1); // [[1,0,0],[2,0,0]]
  y.backward(g, true);
  check_close(x.grad().to_vector(), {2, 0, 0, 16, 0, 0});
  // shape mismatch: invalid_argument naming both shapes
  const std::string msg = error_of([&] { y.backward(Tensor::ones({3, 2}, DType::f64), true); });
  CHECK(contains(msg, "[3, 2]"));
  CHECK(contains(msg, "[2, 3]"));
  CHECK_THROWS_AS(y.backward(Tensor::ones({3, 2}, DType::f64), true), std::invalid_argument);
  // dtype mismatch
  CHECK_THROWS_AS(y.backward(Tensor::ones({2, 3}, DType::f32), true), std::invalid_argument);
  CHECK(contains(error_of([&] { y.backward(Tensor::ones({2, 3}, DType::f32), true); }), "float32"));
  // backward(g) on a leaf puts g in its grad
  Tensor l = leaf({1, 2}, {2});
  l.backward(Tensor::from({3, 4}, {2}, DType::f64));
  check_close(l.grad().to_vector(), {3, 4});
}

TEST_CASE("autograd: a long chain does not overflow the stack") {
  constexpr int kLen = 20000;
  Tensor x = leaf({1.0, 2.0}, {2});
  SUBCASE("backward through 20000 ops") {
    Tensor y = x;
    for (int i = 0; i < kLen; ++i) y = ops::add_scalar(y, 1e-4); // dy/dx = 1
    Tensor z = y;
    for (int i = 0; i < 100; ++i) z = ops::mul_scalar(z, 1.01);
    ops::sum(z).backward();
    const double want = std::pow(1.01, 100);
    check_close(x.grad().to_vector(), {want, want}, 1e-10);
    CHECK(y.to_vector()[0] == doctest::Approx(1.0 + kLen * 1e-4));
  }
  // A graph that backward() did not free is torn down by the destructors: 200000 levels would
  // overflow the stack if that recursed once per node (as it once did).
  constexpr int kDeep = 200000;
  SUBCASE("a chain dropped without backward is destroyed") {
    Tensor y = x;
    for (int i = 0; i < kDeep; ++i) y = ops::add_scalar(y, 1e-4);
    y = Tensor(); // frees 20000 nodes
    CHECK(x.grad().defined() == false);
  }
  SUBCASE("a chain kept by retain_graph is destroyed") {
    Tensor y = x;
    for (int i = 0; i < kDeep; ++i) y = ops::mul_scalar(y, 1.0);
    Tensor s = ops::sum(y);
    s.backward(true);
    check_close(x.grad().to_vector(), {1, 1});
    y = Tensor();
    s = Tensor();
  }
}

TEST_CASE("autograd: backward kernels accumulate into an existing gradient (every gradcheck row)") {
  // dlib's test_layer contract: run backward once to pre-fill each leaf's gradient, then again on
  // a fresh graph; a kernel that writes (=) instead of adding (+=) leaves g1 instead of 2 g1.
  const auto cases = checks::gradcheck_cases("ops"); // registered beside the ops (framework/checks/ops/*_checks.cpp)
  REQUIRE(cases.size() >= 100);
  for (const auto& c : cases) {
    std::vector<Tensor> xs = c.make_inputs();
    for (auto& t : xs)
      if (is_float(t.dtype())) t.set_requires_grad(true);
    const Tensor y0 = c.fn(xs);
    const Tensor R = randn(y0.shape(), 99);
    c.fn(xs).backward(R);
    std::vector<std::vector<double>> g1;
    for (auto& t : xs) g1.push_back(t.grad().defined() ? t.grad().to_vector() : std::vector<double>());
    c.fn(xs).backward(R);
    for (std::size_t k = 0; k < xs.size(); ++k) {
      if (!is_float(xs[k].dtype())) {
        CHECK_FALSE(xs[k].grad().defined());
        continue;
      }
      REQUIRE_MESSAGE(xs[k].grad().defined(), c.name);
      const auto g2 = xs[k].grad().to_vector();
      REQUIRE(g2.size() == g1[k].size());
      bool ok = true;
      for (std::size_t i = 0; i < g2.size(); ++i) ok = ok && std::abs(g2[i] - 2 * g1[k][i]) <= 1e-12 * (1 + std::abs(g2[i]));
      CHECK_MESSAGE(ok, c.name << ": input " << k << " did not accumulate");
    }
  }
}

TEST_CASE("autograd: float32 gradients match float64 for every gradcheck row") {
  // The gradcheck runs the float64 instantiation of each kernel; training runs float32. Same
  // rows, inputs cast to float32: the analytical gradients must agree to float32 precision.
  const auto cases = checks::gradcheck_cases("ops"); // registered beside the ops (framework/checks/ops/*_checks.cpp)
  REQUIRE(cases.size() >= 100);
  for (const auto& c : cases) {
    if (c.name.rfind("to_dtype", 0) == 0) continue; // these rows convert dtypes on purpose
    auto grads = [&](DType d) {
      std::vector<Tensor> xs = c.make_inputs();
      for (auto& t : xs)
        if (is_float(t.dtype())) {
          t = t.to(d);
          t.set_requires_grad(true);
        }
      Tensor y = c.fn(xs);
      CHECK_MESSAGE(y.dtype() == d, c.name);
      y.backward(randn(y.shape(), 7).to(d));
      std::vector<std::vector<double>> g;
      for (auto& t : xs)
        if (is_float(t.dtype())) g.push_back(t.grad().to_vector());
      return g;
    };
    const auto g64 = grads(DType::f64), g32 = grads(DType::f32);
    REQUIRE(g64.size() == g32.size());
    for (std::size_t k = 0; k < g64.size(); ++k) {
      double scale = 1, worst = 0;
      for (double v : g64[k]) scale = std::max(scale, std::abs(v));
      for (std::size_t i = 0; i < g64[k].size(); ++i) worst = std::max(worst, std::abs(g64[k][i] - g32[k][i]));
      CHECK_MESSAGE(worst <= 1e-4 * scale, c.name << ": input " << k << " float32 vs float64 max diff " << worst);
    }
  }
}

TEST_CASE("autograd: the graph is freed after backward") {
  Tensor x = leaf({1, 2, 3}, {3});
  std::weak_ptr<TensorImpl> h_weak, s_weak;
  Tensor loss;
  {
    Tensor h = ops::exp(x);
    Tensor s = ops::softmax(h); // keeps its output
    h_weak = h.impl_ptr();
    s_weak = s.impl_ptr();
    loss = ops::sum(ops::mul(s, h));
  } // the user dropped h and s; the graph still holds them
  CHECK_FALSE(h_weak.expired());
  CHECK_FALSE(s_weak.expired());
  loss.backward();
  CHECK(h_weak.expired());
  CHECK(s_weak.expired());
  CHECK(x.grad().defined()); // leaves keep their gradient
  CHECK(loss.impl()->grad_fn != nullptr);
  CHECK(loss.impl()->grad_fn->released);
  CHECK(loss.impl()->grad_fn->inputs.empty());

  SUBCASE("retain_graph keeps it until the last backward") {
    Tensor x2 = leaf({1, 2}, {2});
    std::weak_ptr<TensorImpl> w;
    Tensor l2;
    {
      Tensor h = ops::tanh(x2);
      w = h.impl_ptr();
      l2 = ops::sum(ops::mul(h, h));
    }
    l2.backward(true);
    CHECK_FALSE(w.expired());
    l2.backward();
    CHECK(w.expired());
  }
  SUBCASE("non-leaf gradients are not kept") {
    Tensor x3 = leaf({1, 2}, {2});
    Tensor h = ops::mul_scalar(x3, 2.0);
    ops::sum(h).backward();
    CHECK_FALSE(h.grad().defined());
    CHECK(x3.grad().defined());
  }
  SUBCASE("dropping an unused graph frees it") {
    std::weak_ptr<TensorImpl> w;
    {
      Tensor h = ops::exp(x);
      Tensor l = ops::sum(h);
      w = h.impl_ptr();
    }
    CHECK(w.expired());
  }
}

TEST_CASE("autograd: a leaf frozen after the graph was built gets no gradient (and nothing crashes)") {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor w = leaf({0.5, -1, 2}, {3});
  Tensor y = ops::add(ops::sum(ops::exp(x)), ops::sum(ops::mul(ops::tanh(x), w)));
  x.set_requires_grad(false); // e.g. freezing a layer between forward and backward
  y.backward();
  CHECK_FALSE(x.grad().defined());
  check_close(w.grad().to_vector(), {std::tanh(1.0), std::tanh(2.0), std::tanh(3.0)});
}

TEST_CASE("autograd: ops on leaves that need no grad record nothing, mixed inputs record") {
  Tensor a = Tensor::from({1, 2}, {2}, DType::f64);
  Tensor b = leaf({3, 4}, {2});
  Tensor y = ops::mul(a, b);
  CHECK(y.requires_grad());
  ops::sum(y).backward();
  check_close(b.grad().to_vector(), {1, 2});
  CHECK_FALSE(a.grad().defined());
  Tensor z = ops::mul(a, a);
  CHECK_FALSE(z.requires_grad());
  CHECK(z.is_leaf());
  // multi-input ops with one constant input: only the other gets a gradient
  Tensor c = leaf({1, 2, 3, 4}, {2, 2});
  ops::sum(ops::mul(ops::concat({a, c.slice(0, 0, 1).reshape({2})}, 0), Tensor::from({1, 2, 3, 4}, {4}, DType::f64)))
      .backward();
  check_close(c.grad().to_vector(), {3, 4, 0, 0});
  CHECK_FALSE(a.grad().defined());
  Tensor m = leaf({1, 2, 3, 4}, {2, 2});
  ops::sum(ops::matmul(Tensor::from({1, 1}, {1, 2}, DType::f64), m)).backward(); // d/dm sum(1^T m) = 1
  check_close(m.grad().to_vector(), {1, 1, 1, 1});
}


// ---- watching a backward (WatchBackwards: the gradient-ready hooks of data-parallel training,
// framework/distributed/grad_ready_hooks.hpp, are built on it and tested in test_distributed) -----

namespace {
// A watch that logs each tensor's gradient (by the names in `names`) and each node done.
struct LoggedWatch final : BackwardWatch {
  LoggedWatch(std::vector<std::string>& events, const std::map<const TensorImpl*, std::string>& names)
      : events(events), names(names) {}
  void gradient(const TensorImpl& t, const Tensor& g) override {
    events.push_back("grad " + names.at(&t) + " " + std::to_string(g.to_vector().front()));
  }
  void node_done(const Node& n) override { events.push_back(std::string(n.name) + " done"); }
  std::vector<std::string>& events;
  const std::map<const TensorImpl*, std::string>& names;
};
} // namespace

TEST_CASE("autograd: a backward watcher sees each walk of every thread - each gradient complete, each node done") {
  Tensor x = leaf({2, 5}, {2}), w = leaf({3, -1}, {2});
  std::vector<std::string> events;
  std::size_t walked = 0;
  int asked = 0;
  auto backward = [&] {
    const Tensor m = ops::mul(w, x), y = ops::add(m, w); // dy/dx = w, dy/dw = x + 1
    const std::map<const TensorImpl*, std::string> names = {
        {x.impl(), "x"}, {w.impl(), "w"}, {m.impl(), "m"}, {y.impl(), "y"}};
    WatchBackwards watching([&](const std::vector<std::shared_ptr<TensorImpl>>& order) -> std::unique_ptr<BackwardWatch> {
      ++asked;
      walked = order.size();
      if (asked == 2) return nullptr; // nothing to watch in that walk
      return std::make_unique<LoggedWatch>(events, names);
    });
    y.backward(Tensor::ones({2}, DType::f64));
  };
  backward();
  CHECK(walked == 4);
  // the walk: y (seeded), its node; m, its node; then the leaves in reverse post-order, w last
  // with the sum of both nodes' contributions
  CHECK(events == std::vector<std::string>{"grad y 1.000000", "add done", "grad m 1.000000", "mul done",
                                           "grad x 3.000000", "grad w 3.000000"});
  // a watcher returning null watches nothing; one that is gone is not asked
  events.clear();
  backward();
  CHECK(asked == 2);
  CHECK(events.empty());
  ops::sum(x).backward();
  CHECK(asked == 2);
  // installed for every thread: a backward on another thread asks it too, on that thread
  {
    std::thread::id asked_on;
    WatchBackwards watching([&](const auto&) -> std::unique_ptr<BackwardWatch> {
      asked_on = std::this_thread::get_id();
      return nullptr;
    });
    std::thread other([&] { ops::sum(x).backward(); });
    const std::thread::id other_id = other.get_id();
    other.join();
    CHECK(asked_on == other_id);
  }
}
