// The gradcheck API itself (framework/core/gradcheck.hpp). Above all the negative control: a custom op
// with a deliberately wrong backward must FAIL, and the report must say where and by how much.
// A checker that passes everything would make the whole gradient table worthless.
#include <doctest/doctest.h>

#include <cmath>

#include "framework/core/autograd.hpp"
#include "framework/core/gradcheck.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::randn;

namespace {

// Input i's gradient buffer ready for `+=` loops: zero-filled on its first write (see GradBuffer).
double* add_into(const GradBuffer& g) {
  double* d = g.data<double>();
  if (g.first_write) std::fill(d, d + g.tensor.numel(), 0.0);
  return d;
}

// A custom op written the way ops are: forward kernel, then record() with a backward closure.
// y = x^2; the backward computes dx += factor * 2x * dy (factor 1 is right).
Tensor square_op(const Tensor& x, double factor) {
  Tensor xc = x.contiguous();
  Tensor out = new_tensor(x.shape(), x.dtype());
  const double* px = xc.data<double>();
  double* y = out.data<double>();
  for (std::int64_t i = 0; i < out.numel(); ++i) y[i] = px[i] * px[i];
  return record(out, "square", {xc}, [factor](Node& n, const Tensor& gy) {
    const double* xv = n.input(0).data<double>();
    const double* g = gy.data<double>();
    double* d = add_into(n.grad_buffer(0));
    for (std::int64_t i = 0; i < gy.numel(); ++i) d[i] += factor * 2.0 * xv[i] * g[i];
  });
}

// y = a + b with a (R, C), b (C) broadcast over rows. With `sum_rows` false the backward makes
// the classic mistake: db takes only row 0's gradient instead of the sum over the broadcast axis.
Tensor row_add_op(const Tensor& a, const Tensor& b, bool sum_rows) {
  Tensor out;
  {
    NoGradGuard ng;
    out = ops::add(a, b);
  }
  const std::int64_t rows = a.shape()[0], cols = a.shape()[1];
  return record(out, "row_add", {a, b}, [rows, cols, sum_rows](Node& n, const Tensor& gy) {
    const double* g = gy.data<double>();
    if (GradBuffer ga = n.grad_buffer(0); ga) {
      double* da = add_into(ga);
      for (std::int64_t i = 0; i < rows * cols; ++i) da[i] += g[i];
    }
    if (GradBuffer gb = n.grad_buffer(1); gb) {
      double* db = add_into(gb);
      for (std::int64_t r = 0; r < (sum_rows ? rows : 1); ++r)
        for (std::int64_t j = 0; j < cols; ++j) db[j] += g[r * cols + j];
    }
  });
}

// y = x^T for a square x, as a copy. With `transpose_back` false the backward forgets to
// transpose the gradient back (a layout bug that a square shape would otherwise hide).
Tensor transpose_copy_op(const Tensor& x, bool transpose_back) {
  Tensor out;
  {
    NoGradGuard ng;
    out = ops::transpose(x, 0, 1).contiguous();
  }
  const std::int64_t n = x.shape()[0];
  return record(out, "transpose_copy", {x}, [n, transpose_back](Node& node, const Tensor& gy) {
    double* dx = add_into(node.grad_buffer(0));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) dx[i * n + j] += gy.data<double>()[transpose_back ? j * n + i : i * n + j];
  });
}

// y = exp(x), but the backward ASSIGNS (=) even when the buffer holds earlier contributions
// (first_write false), instead of accumulating (+=).
Tensor exp_assign_op(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard ng;
    out = ops::exp(x);
  }
  Tensor y = out.detach();
  return record(out, "exp_assign", {x}, [y](Node& n, const Tensor& gy) {
    double* dx = n.grad_buffer(0).data<double>();
    for (std::int64_t i = 0; i < gy.numel(); ++i) dx[i] = gy.data<double>()[i] * y.data<double>()[i];
  });
}

// softmax over the last axis whose backward adds NOTHING. Under L = sum(softmax(x)) that is the
// right answer (each row sums to 1, a constant); only the random projection exposes it.
Tensor softmax_no_backward_op(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard ng;
    out = ops::softmax(x);
  }
  return record(out, "softmax_no_backward", {x},
                [](Node& n, const Tensor&) { n.add_to_grad(0, Tensor::zeros(n.inputs[0]->shape, DType::f64)); });
}

} // namespace

TEST_CASE("gradcheck api: a correct custom op passes") {
  const Tensor x = randn({3, 4}, 1);
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& xs) { return square_op(xs[0], 1.0); }, {x});
  CHECK_MESSAGE(r.ok, r.summary());
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].checked);
  CHECK(r.inputs[0].ok);
  CHECK(r.inputs[0].shape == Dims{3, 4});
  CHECK(r.inputs[0].max_abs_err < 1e-7);
  CHECK(r.summary().find("FAIL") == std::string::npos);
  // and the broadcast-summing version of row_add
  const GradcheckResult r2 = gradcheck(
      [](const std::vector<Tensor>& xs) { return row_add_op(xs[0], xs[1], true); }, {randn({4, 3}, 2), randn({3}, 3)});
  CHECK_MESSAGE(r2.ok, r2.summary());
  const GradcheckResult r3 = gradcheck(
      [](const std::vector<Tensor>& xs) { return transpose_copy_op(xs[0], true); }, {randn({3, 3}, 4)});
  CHECK_MESSAGE(r3.ok, r3.summary());
}

TEST_CASE("gradcheck api: NEGATIVE CONTROL - a backward off by a factor 2 fails, with the worst index") {
  const Tensor x = randn({3, 4}, 5);
  GradcheckOptions opt;
  const GradcheckResult r =
      gradcheck([](const std::vector<Tensor>& xs) { return square_op(xs[0], 2.0); }, {x}, opt);
  CHECK_FALSE(r.ok);
  REQUIRE(r.inputs.size() == 1);
  const GradcheckInputReport& rep = r.inputs[0];
  CHECK(rep.checked);
  CHECK_FALSE(rep.ok);
  // analytical = 2 * numerical everywhere, so the relative error is 1 and the worst element is
  // where the true gradient 2 x_i R_i is largest in magnitude (R: the projection, from opt.seed).
  CHECK(rep.max_rel_err == doctest::Approx(1.0).epsilon(1e-4));
  CHECK(rep.analytical_at_worst == doctest::Approx(2.0 * rep.numerical_at_worst).epsilon(1e-4));
  Generator gen(opt.seed);
  const std::vector<double> R = Tensor::normal({3, 4}, 0.0, 1.0, gen, DType::f64).to_vector();
  const std::vector<double> xv = x.to_vector();
  std::int64_t expect = 0;
  for (std::int64_t i = 1; i < 12; ++i)
    if (std::abs(xv[i] * R[i]) > std::abs(xv[expect] * R[expect])) expect = i;
  CHECK(rep.worst_index == expect);
  CHECK(rep.numerical_at_worst == doctest::Approx(2.0 * xv[expect] * R[expect]).epsilon(1e-6));
  CHECK(rep.max_abs_err == doctest::Approx(std::abs(2.0 * xv[expect] * R[expect])).epsilon(1e-6));
  // The summary names the input, its shape, the errors and the failing index.
  const std::string s = r.summary();
  CHECK(s.find("input 0 [3, 4]") != std::string::npos);
  CHECK(s.find("FAIL at flat index " + std::to_string(expect)) != std::string::npos);
  CHECK(s.find("max abs err") != std::string::npos);
  MESSAGE("negative control report: " << s);
}

TEST_CASE("gradcheck api: NEGATIVE CONTROL - a missing broadcast sum fails on the broadcast input only") {
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& xs) { return row_add_op(xs[0], xs[1], false); }, {randn({4, 3}, 6), randn({3}, 7)});
  CHECK_FALSE(r.ok);
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0].ok);
  CHECK_FALSE(r.inputs[1].ok);
  CHECK(r.inputs[1].worst_index >= 0);
  CHECK(r.inputs[1].worst_index < 3);
  CHECK(r.inputs[1].max_abs_err > 1e-2);
  CHECK(r.summary().find("input 1 [3]") != std::string::npos);
}

TEST_CASE("gradcheck api: NEGATIVE CONTROL - a layout bug and a non-accumulating backward fail") {
  const GradcheckResult r1 = gradcheck(
      [](const std::vector<Tensor>& xs) { return transpose_copy_op(xs[0], false); }, {randn({3, 3}, 8)});
  CHECK_FALSE(r1.ok);
  // x feeds two exp_assign nodes: the second assignment overwrites the first's contribution.
  const GradcheckResult r2 = gradcheck(
      [](const std::vector<Tensor>& xs) { return ops::add(exp_assign_op(xs[0]), exp_assign_op(xs[0])); },
      {randn({2, 3}, 9)});
  CHECK_FALSE(r2.ok);
  // Tightening only: a right op still passes at a much smaller atol/rtol, a wrong one by 0.1%
  // fails at the defaults.
  GradcheckOptions tight;
  tight.atol = 1e-8;
  tight.rtol = 1e-6;
  CHECK(gradcheck([](const std::vector<Tensor>& xs) { return square_op(xs[0], 1.0); }, {randn({5}, 10)}, tight).ok);
  CHECK_FALSE(gradcheck([](const std::vector<Tensor>& xs) { return square_op(xs[0], 1.01); }, {randn({5}, 10)}).ok);
}

TEST_CASE("gradcheck api: float32 inputs are checked in float64, the caller's tensors are untouched") {
  const Tensor x = randn({2, 3}, 11, DType::f32);
  const std::vector<double> before = x.to_vector();
  DType seen = DType::f32;
  bool seen_leaf = false;
  const GradcheckResult r = gradcheck(
      [&](const std::vector<Tensor>& xs) {
        seen = xs[0].dtype();
        seen_leaf = xs[0].is_leaf() && xs[0].requires_grad();
        return ops::tanh(xs[0]);
      },
      {x});
  CHECK(seen == DType::f64);
  CHECK(seen_leaf);
  CHECK_MESSAGE(r.ok, r.summary());
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0].checked);
  CHECK(x.dtype() == DType::f32);
  CHECK(x.to_vector() == before);
  CHECK_FALSE(x.requires_grad());
  CHECK_FALSE(x.grad().defined());
  // A float64 input is copied too: perturbation never writes the caller's buffer.
  const Tensor x64 = randn({4}, 12);
  const std::vector<double> b64 = x64.to_vector();
  CHECK(gradcheck([](const std::vector<Tensor>& xs) { return ops::exp(xs[0]); }, {x64}).ok);
  CHECK(x64.to_vector() == b64);
  CHECK_FALSE(x64.grad().defined());
}

TEST_CASE("gradcheck api: integer inputs are passed through and skipped") {
  const Tensor w = randn({4, 3}, 13);
  const Tensor idx = Tensor::from_ints({3, 0, 3}, {3});
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& xs) {
        CHECK(xs[1].dtype() == DType::i64);
        return ops::index_select(xs[0], 0, xs[1]);
      },
      {w, idx});
  CHECK_MESSAGE(r.ok, r.summary());
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0].checked);
  CHECK_FALSE(r.inputs[1].checked);
  CHECK(r.inputs[1].ok);
  CHECK(r.inputs[1].shape == Dims{3});
  CHECK(r.inputs[1].worst_index == -1);
  CHECK(r.summary().find("input 1") == std::string::npos); // only checked inputs are reported
  CHECK(idx.to_int_vector() == std::vector<std::int64_t>{3, 0, 3});
}

TEST_CASE("gradcheck api: a function must return a float64 tensor") {
  const Tensor x = randn({3}, 14);
  CHECK_THROWS_AS(gradcheck([](const std::vector<Tensor>& xs) { return ops::to_dtype(xs[0], DType::f32); }, {x}),
                  std::invalid_argument);
  CHECK_THROWS_AS(gradcheck([](const std::vector<Tensor>&) { return Tensor(); }, {x}), std::invalid_argument);
  // An output that does not depend on the input has zero gradient both ways: it passes.
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>&) { return Tensor::ones({2}, DType::f64); }, {x});
  CHECK(r.ok);
  CHECK(r.inputs[0].max_abs_err == 0.0);
}

TEST_CASE("gradcheck api: NEGATIVE CONTROL - the random projection exposes what a plain sum hides") {
  // With the plain sum as the loss, a softmax backward that does nothing looks right...
  const Tensor x = randn({2, 4}, 15);
  const GradcheckResult plain = gradcheck(
      [](const std::vector<Tensor>& xs) { return ops::sum(softmax_no_backward_op(xs[0])); }, {x});
  CHECK(plain.ok);
  // ...but gradcheck projects the output on a random tensor, and then it fails.
  const GradcheckResult projected =
      gradcheck([](const std::vector<Tensor>& xs) { return softmax_no_backward_op(xs[0]); }, {x});
  CHECK_FALSE(projected.ok);
  CHECK(projected.inputs[0].max_abs_err > 1e-2);
}
