// test_autocast.cpp - the matmul precision and runtime::Autocast (framework/engine/autocast.hpp,
// framework/engine/blas/linear_gemm.hpp): a linear layer's forward and backward under bf16 against
// plain loops over the bf16-rounded operands (and, as the negative control, not within float32's
// error of the unrounded ones); the weights rounded once per guard and read from the copy, the
// activations rounded in every call and never looked up by address; float64 untouched; the
// refusals (reference mode, a CPU without bf16); the same bits at any thread count; the float32
// gemm's choice (HEADGRAD_GEMM) and its default, OpenBLAS's bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/engine/autocast.hpp"
#include "framework/engine/blas/bf16.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/blas/linear_gemm.hpp"
#include "framework/engine/blas/onednn_matmul.hpp"
#include "framework/engine/kernels/gemm.hpp"
#include "framework/nn/layers.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::randn;
using test_support::ScopedEnv;

namespace {

double rounded(float x) { return static_cast<double>(blas::to_float(blas::to_bf16(x))); }

// C (m x n) = op(A) op(B) in double from float operands, each first rounded to bf16 when `round`,
// with float32's error bound for a sum of k products, (k + 2) u sum |terms| (Higham, "Accuracy and
// Stability of Numerical Algorithms", 3.1). Returns how many elements of `got` lie outside it.
int mismatches(const std::vector<float>& got, const float* a, bool ta, const float* b, bool tb, std::int64_t m,
               std::int64_t n, std::int64_t k, bool round) {
  const double u = std::ldexp(1.0, -24);
  int bad = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0, size = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const float x = ta ? a[p * m + i] : a[i * k + p], y = tb ? b[j * k + p] : b[p * n + j];
        const double t = round ? rounded(x) * rounded(y) : static_cast<double>(x) * static_cast<double>(y);
        sum += t;
        size += std::abs(t);
      }
      if (!(std::abs(got[static_cast<std::size_t>(i * n + j)] - sum) <= static_cast<double>(k + 2) * u * size + 1e-30))
        ++bad;
    }
  return bad;
}

std::vector<float> floats(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

// A linear layer's forward and backward, y = x W^T (no bias: the bias add is float32 either way)
// and the gradients of sum(y * g): what each gemm returned and its operands.
struct LinearRun {
  std::int64_t rows = 96, in = 80, out = 72;
  Tensor x = randn({96, 80}, 1, DType::f32), w = randn({72, 80}, 2, DType::f32), g = randn({96, 72}, 3, DType::f32);
  std::vector<float> y, dx, dw;
  LinearRun() {
    x.set_requires_grad(true);
    w.set_requires_grad(true);
  }
  void run() {
    x.zero_grad();
    w.zero_grad();
    const Tensor out_y = ops::linear(x, w, Tensor());
    ops::sum(out_y * g).backward();
    y = floats(out_y);
    dx = floats(x.grad());
    dw = floats(w.grad());
  }
  // every gemm against the loop over (bf16-rounded when `round`) operands: y = x W^T, dx = g W, dW = g^T x
  int mismatches_all(bool round) const {
    const float *xp = x.data<float>(), *wp = w.data<float>(), *gp = g.data<float>();
    return mismatches(y, xp, false, wp, true, rows, out, in, round) +
           mismatches(dx, gp, false, wp, false, rows, in, out, round) +
           mismatches(dw, gp, true, xp, false, out, in, rows, round);
  }
};

} // namespace

TEST_CASE("autocast: a linear layer's three gemms equal the loop over bf16-rounded operands, and not the float32 one") {
  if (!blas::bf16_supported()) return; // (the refusal has its own case)
  LinearRun lin;
  lin.run(); // float32: the unrounded loop within float32's error
  CHECK(lin.mismatches_all(false) == 0);
  {
    runtime::Autocast bf16(std::vector<Tensor>{lin.w});
    CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::bf16);
    lin.run();
  }
  CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::f32);
  CHECK(lin.mismatches_all(true) == 0);
  // negative control: the bf16 results are far from float32's products (the rounding shows)
  CHECK(lin.mismatches_all(false) > 1000);
  // the process-wide switch alone gives the same bits (weights rounded per call: the same values)
  const std::vector<float> y = lin.y, dx = lin.dx, dw = lin.dw;
  runtime::set_matmul_precision(runtime::MatmulPrecision::bf16);
  lin.run();
  runtime::set_matmul_precision(runtime::MatmulPrecision::f32);
  CHECK(std::memcmp(y.data(), lin.y.data(), y.size() * 4) == 0);
  CHECK(std::memcmp(dx.data(), lin.dx.data(), dx.size() * 4) == 0);
  CHECK(std::memcmp(dw.data(), lin.dw.data(), dw.size() * 4) == 0);
}

TEST_CASE("autocast: weights are rounded once per guard and read from the copy; activations rounded in every call") {
  if (!blas::bf16_supported()) return;
  // two layers, x -> relu(x W1^T + b1) W2^T + b2, x not a leaf that needs a gradient
  Generator init(7);
  nn::Linear l1(32, 48, true, init), l2(48, 16, true, init);
  const Tensor x = randn({64, 32}, 9, DType::f32);
  auto step = [&] {
    for (auto& [name, p] : l1.named_parameters()) p.zero_grad();
    for (auto& [name, p] : l2.named_parameters()) p.zero_grad();
    const Tensor loss = ops::sum(l2.forward(ops::relu(l1.forward(x))));
    loss.backward();
  };
  NamedTensors params = l1.named_parameters();
  for (const auto& p : l2.named_parameters()) params.push_back(p);
  for (int s = 0; s < 2; ++s) { // two steps: the weights are rounded again for each
    const runtime::AutocastStats before = runtime::autocast_stats();
    {
      runtime::Autocast bf16(params);
      step();
    }
    const runtime::AutocastStats after = runtime::autocast_stats();
    CHECK(after.weight_buffers - before.weight_buffers == 4); // W1, b1, W2, b2, once
    CHECK(after.weight_elements - before.weight_elements == 48 * 32 + 48 + 16 * 48 + 16);
    // W1 forward; W2 forward and in dh = dy W2 (x needs no gradient: no dx = dh W1)
    CHECK(after.weight_reads - before.weight_reads == 3);
    // rounded in each call: x, then h in the forward; dy in dh = dy W2, and again with h in
    // dW2 = dy^T h; dh and x in dW1 = dh^T x
    CHECK(after.operand_conversions - before.operand_conversions == 7);
  }
}

TEST_CASE("autocast: an activation overwritten at the same address is rounded afresh (never cached by address)") {
  if (!blas::bf16_supported()) return;
  Tensor x = randn({40, 24}, 11, DType::f32);
  const Tensor w = randn({20, 24}, 12, DType::f32);
  runtime::Autocast bf16(std::vector<Tensor>{w});
  const std::vector<float> y1 = floats(ops::linear(x, w, Tensor()));
  CHECK(mismatches(y1, x.data<float>(), false, w.data<float>(), true, 40, 20, 24, true) == 0);
  float* xp = x.data<float>(); // new values at the same address, as the allocator hands out a freed buffer
  for (std::int64_t i = 0; i < x.numel(); ++i) xp[i] = 0.5f * xp[i] + 1.0f;
  const std::vector<float> y2 = floats(ops::linear(x, w, Tensor()));
  CHECK(mismatches(y2, x.data<float>(), false, w.data<float>(), true, 40, 20, 24, true) == 0);
  CHECK(y1 != y2);
}

TEST_CASE("autocast: a buffer listed twice (a tied weight) is rounded once; a view of a weight reads its copy") {
  if (!blas::bf16_supported()) return;
  const Tensor w = randn({30, 16}, 13, DType::f32);
  const runtime::AutocastStats before = runtime::autocast_stats();
  runtime::Autocast bf16(NamedTensors{{"wte.weight", w}, {"lm_head.weight", w}});
  CHECK(runtime::autocast_stats().weight_buffers - before.weight_buffers == 1);
  const Tensor x = randn({8, 16}, 14, DType::f32);
  const Tensor rows = w.slice(0, 10, 20); // rows 10..19: a contiguous view inside the weight
  const std::vector<float> y = floats(ops::linear(x, rows, Tensor()));
  CHECK(runtime::autocast_stats().weight_reads - before.weight_reads == 1);
  CHECK(mismatches(y, x.data<float>(), false, rows.data<float>(), true, 8, 10, 16, true) == 0);
}

TEST_CASE("autocast: float64 stays float64, bit for bit") {
  if (!blas::bf16_supported()) return;
  const Tensor x = randn({12, 9}, 15), w = randn({7, 9}, 16), b = randn({7}, 17);
  const std::vector<double> plain = ops::linear(x, w, b).to_vector();
  runtime::Autocast bf16(NamedTensors{{"w", w}, {"b", b}});
  const std::vector<double> inside = ops::linear(x, w, b).to_vector();
  CHECK(std::memcmp(plain.data(), inside.data(), plain.size() * sizeof(double)) == 0);
}

TEST_CASE("autocast: guards nest and restore; reference mode and a CPU without bf16 refuse it") {
  if (blas::bf16_supported()) {
    const Tensor w = randn({4, 4}, 18, DType::f32);
    {
      runtime::Autocast outer(std::vector<Tensor>{w});
      {
        runtime::Autocast inner(std::vector<Tensor>{w}, runtime::MatmulPrecision::f32);
        CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::f32);
      }
      CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::bf16);
    }
    CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::f32);
    runtime::set_reference(true);
    CHECK_THROWS_WITH_AS(runtime::Autocast(std::vector<Tensor>{w}),
                         "reference mode multiplies in float32 only: the matmul precision bf16 is for the engine",
                         std::logic_error);
    CHECK_THROWS_AS(runtime::set_matmul_precision(runtime::MatmulPrecision::bf16), std::logic_error);
    runtime::Autocast f32(std::vector<Tensor>{w}, runtime::MatmulPrecision::f32); // float32 is always fine
    runtime::set_reference(false);
    CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::f32);
  }
  ScopedEnv missing("HEADGRAD_BF16_ASSUME_MISSING", "1");
  CHECK_THROWS_WITH_AS(runtime::set_matmul_precision(runtime::MatmulPrecision::bf16),
                       "this CPU has no avx512_bf16 or amx_bf16: bf16 training needs one of them", std::runtime_error);
  CHECK_THROWS_AS(runtime::Autocast(std::vector<runtime::WeightBuffer>{}), std::runtime_error);
  CHECK(runtime::matmul_precision() == runtime::MatmulPrecision::f32);
  CHECK(blas::bf16_slow_note().empty()); // no bf16 at all: nothing to compare
}

TEST_CASE("bf16 and oneDNN linear gemms: blocks by the sizes alone, the same bits on 1 and 2 threads") {
  CHECK(engine::onednn_grid_parts(768, 384, 128) == 2);
  CHECK(engine::onednn_grid_parts(2048, 256, 256) == 8);
  CHECK(engine::onednn_grid_parts(128, 768, 384) == 2); // the longer side: n
  CHECK(engine::onednn_grid_parts(16, 16, 16) == 1);
  Generator gen(19);
  const std::int64_t m = 1024, n = 96, k = 160;
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n));
  for (auto& v : a) v = static_cast<float>(gen.normal());
  for (auto& v : b) v = static_cast<float>(gen.normal());
  REQUIRE(engine::onednn_grid_parts(m, n, k) == 4);
  const int saved = omp_get_max_threads();
  auto run = [&](bool bf16, int threads) {
    omp_set_num_threads(threads);
    std::vector<float> c(static_cast<std::size_t>(m * n), 0.0f);
    if (bf16) engine::bf16_linear_gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    else engine::onednn_linear_gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    return c;
  };
  std::vector<bool> kinds = {false};
  if (blas::bf16_supported()) kinds.push_back(true);
  for (bool bf16 : kinds) {
    INFO("bf16 ", bf16);
    const std::vector<float> one = run(bf16, 1), two = run(bf16, 2);
    CHECK(std::memcmp(one.data(), two.data(), one.size() * 4) == 0);
    CHECK(mismatches(one, a.data(), false, b.data(), false, m, n, k, bf16) == 0);
  }
  omp_set_num_threads(saved);
}

TEST_CASE("the float32 linear gemm: OpenBLAS's bits by default, oneDNN's with HEADGRAD_GEMM=onednn, auto's rule") {
  CHECK(runtime::float32_gemm() == runtime::Float32Gemm::openblas); // (the suite runs without HEADGRAD_GEMM)
  CHECK(runtime::gemm_notice().empty());
  Generator gen(20);
  const std::int64_t m = 200, n = 72, k = 1000;
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(n * k));
  for (auto& v : a) v = static_cast<float>(gen.normal());
  for (auto& v : b) v = static_cast<float>(gen.normal());
  auto via_table = [&] {
    std::vector<float> c(static_cast<std::size_t>(m * n), 0.0f);
    kernels::gemm<float>(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
    return c;
  };
  std::vector<float> blas_c(static_cast<std::size_t>(m * n), 0.0f), dnnl_c = blas_c;
  engine::gemm<float>(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, blas_c.data(), n);
  blas::onednn_sgemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, dnnl_c.data(), n);
  REQUIRE(blas_c != dnnl_c); // the two libraries add in other orders here: the check below can tell them apart
  CHECK(via_table() == blas_c);
  runtime::set_float32_gemm(runtime::Float32Gemm::onednn);
  CHECK(via_table() == dnnl_c);
  runtime::set_float32_gemm(runtime::Float32Gemm::automatic);
  CHECK(via_table() == (runtime::float32_gemm_on_onednn(m, n, k) ? dnnl_c : blas_c));
  CHECK(!runtime::float32_gemm_on_onednn(1, n, k)); // one row: OpenBLAS's gemv
  runtime::set_float32_gemm(runtime::Float32Gemm::openblas);
  CHECK(via_table() == blas_c);
}

TEST_CASE("bf16 linear gemms on the text step's shapes: error at most 1% of the largest output, float32's 1e-5") {
  if (!blas::bf16_supported()) return;
  // The language model of `headgrad train --task text` (B T = 768 rows, d 128, ffn 512, vocab 113):
  // its linear layers' forward gemms and two of the backward's, on inputs of a trained model's scale
  // (activations ~ N(0, 1), weights ~ N(0, 0.02^2)). The error against the exact product of the
  // unrounded inputs comes from rounding them to 8 significant bits (relative error <= 2^-9 each).
  struct Shape {
    const char* what;
    bool ta, tb;
    std::int64_t m, n, k;
  };
  const Shape shapes[] = {{"qkv", false, true, 768, 384, 128},    {"proj", false, true, 768, 128, 128},
                          {"fc", false, true, 768, 512, 128},     {"fc2", false, true, 768, 128, 512},
                          {"lm_head", false, true, 768, 113, 128}, {"fc dX", false, false, 768, 128, 512},
                          {"fc dW", true, false, 512, 128, 768}};
  Generator gen(21);
  double worst_bf16 = 0, worst_f32 = 0;
  for (const Shape& s : shapes) {
    CAPTURE(s.what);
    const bool a_is_activation = !s.ta; // dW = dY^T X: both operands are activations/gradients
    std::vector<float> a(static_cast<std::size_t>(s.m * s.k)), b(static_cast<std::size_t>(s.k * s.n));
    for (auto& v : a) v = static_cast<float>(gen.normal());
    for (auto& v : b) v = static_cast<float>(gen.normal() * (a_is_activation ? 0.02 : 1.0));
    const std::int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    std::vector<float> c16(static_cast<std::size_t>(s.m * s.n)), c32 = c16;
    engine::bf16_linear_gemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c16.data(), s.n);
    engine::gemm<float>(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c32.data(), s.n);
    double largest = 0, e16 = 0, e32 = 0;
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        double exact = 0;
        for (std::int64_t p = 0; p < s.k; ++p)
          exact += static_cast<double>(s.ta ? a[p * lda + i] : a[i * lda + p]) *
                   static_cast<double>(s.tb ? b[j * ldb + p] : b[p * ldb + j]);
        largest = std::max(largest, std::abs(exact));
        e16 = std::max(e16, std::abs(c16[static_cast<std::size_t>(i * s.n + j)] - exact));
        e32 = std::max(e32, std::abs(c32[static_cast<std::size_t>(i * s.n + j)] - exact));
      }
    worst_bf16 = std::max(worst_bf16, e16 / largest);
    worst_f32 = std::max(worst_f32, e32 / largest);
    CHECK(e16 / largest <= 1e-2);
    CHECK(e32 / largest <= 1e-5);
    CHECK(e16 > 10 * e32); // (the rounding shows: bf16 ran)
  }
  MESSAGE("worst error / largest |output|: bf16 ", worst_bf16, ", float32 ", worst_f32);
}
