// gradcheck_ops.cpp - gradient-check rows for every op in framework/ops/ops.hpp.
//
// Each row is "<op> <variant>": the first word is the op's name in ops.hpp (the test checks that
// every op there has a row). Inputs are float64 from fixed seeds. Layouts the kernels treat
// specially are made inside `fn` (gradcheck hands `fn` contiguous leaves): a transpose/permute
// view gives a non-contiguous operand, passing the same leaf twice gives a reused node.
// Every row runs with the default tolerances (eps 1e-6, atol 1e-5, rtol 1e-3); the one row that
// changes an option says why beside it.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "framework/ops/ops.hpp"
#include "framework/random.hpp"
#include "train/cli/gradcheck_table.hpp"

namespace headgrad::cli {
namespace {

using Inputs = std::vector<Tensor>;

// N(0, 1), float64.
Tensor randn(const Dims& s, std::uint64_t seed) {
  Generator g(seed);
  return Tensor::normal(s, 0.0, 1.0, g, DType::f64);
}

// U(0.5, 2): for log, sqrt, pow with fractional/negative exponents, and divisors.
Tensor positive(const Dims& s, std::uint64_t seed) {
  Generator g(seed);
  return Tensor::uniform(s, 0.5, 2.0, g, DType::f64);
}

// N(0, 1) with every |value| >= 0.1: a difference of +-1e-6 never straddles relu's kink at 0
// (nor makes a divisor tiny).
Tensor away_from_zero(const Dims& s, std::uint64_t seed) {
  std::vector<double> v = randn(s, seed).to_vector();
  for (double& x : v)
    if (std::abs(x) < 0.1) x = x < 0 ? x - 0.1 : x + 0.1;
  return Tensor::from(v, s, DType::f64);
}

// A random permutation of -1.2, -1.1, ... (0.1 apart): every value distinct by far more than
// 2 eps, so max's argmax cannot flip under a perturbation.
Tensor distinct(const Dims& s, std::uint64_t seed) {
  const std::int64_t n = s.numel();
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = 0.1 * static_cast<double>(i) - 1.2;
  Generator g(seed);
  for (std::int64_t i = n - 1; i > 0; --i) // Fisher-Yates
    std::swap(v[static_cast<std::size_t>(i)], v[static_cast<std::size_t>(g.below(static_cast<std::uint64_t>(i + 1)))]);
  return Tensor::from(v, s, DType::f64);
}

// Values k/64 with |k| < 256: exactly representable in float32, and so are x +- 2^-10 and the
// product of two such values (< 24 significant bits). See the to_dtype rows.
Tensor grid64(const Dims& s, std::uint64_t seed) {
  Generator g(seed);
  std::vector<double> v(static_cast<std::size_t>(s.numel()));
  for (double& x : v) x = (static_cast<double>(g.below(255)) - 127.0) / 64.0;
  return Tensor::from(v, s, DType::f64);
}

// x with every value moved at least 0.1 away from each of `points` (clamp's bounds), so a
// perturbation never crosses one.
Tensor away_from(const Tensor& x, const std::vector<double>& points) {
  std::vector<double> v = x.to_vector();
  for (double& e : v)
    for (double p : points)
      if (std::abs(e - p) < 0.1) e = e < p ? p - 0.1 - (p - e) : p + 0.1 + (e - p);
  return Tensor::from(v, x.shape(), DType::f64);
}

Tensor ints(const std::vector<std::int64_t>& v, const Dims& s) { return Tensor::from_ints(v, s); }

struct Table {
  std::vector<GradcheckCase> rows;
  void add(std::string name, std::string shapes, std::function<Inputs()> make, GradcheckFn fn,
           GradcheckOptions opt = {}) {
    rows.push_back(GradcheckCase{"ops", std::move(name), std::move(shapes), std::move(make), std::move(fn), opt});
  }
};

// ---- views and copies ---------------------------------------------------------------------------
void shape_rows(Table& t) {
  // to_dtype: a float64 -> float32 -> float64 round trip rounds away most of a 1e-6 perturbation,
  // so these rows use values on a 1/64 grid and eps = 2^-10: every perturbed input, and every
  // product in the float32 mul, is then exact in float32, and the difference quotient measures
  // the true derivative. (eps is not a tolerance; atol and rtol stay at their defaults. Central
  // differences of the linear rows are exact at any eps; exp's truncation error at eps ~ 1e-3 is
  // eps^2 e^x / 6 ~ 1e-6 relative.)
  GradcheckOptions grid_opt;
  grid_opt.eps = 1.0 / 1024.0;
  t.add("to_dtype f64->f32 mul f32->f64", "[3, 4] * [3, 4] via float32",
        [] { return Inputs{grid64({3, 4}, 1), grid64({3, 4}, 2)}; },
        [](const Inputs& x) {
          return ops::to_dtype(ops::mul(ops::to_dtype(x[0], DType::f32), ops::to_dtype(x[1], DType::f32)), DType::f64);
        },
        grid_opt);
  t.add("to_dtype round trip then exp", "[2, 5] via float32", [] { return Inputs{grid64({2, 5}, 3)}; },
        [](const Inputs& x) { return ops::exp(ops::to_dtype(ops::to_dtype(x[0], DType::f32), DType::f64)); },
        grid_opt);
  t.add("to_dtype same dtype (identity)", "[2, 3]", [] { return Inputs{randn({2, 3}, 4)}; },
        [](const Inputs& x) { return ops::mul(ops::to_dtype(x[0], DType::f64), x[0]); });

  t.add("clone contiguous", "[2, 3]", [] { return Inputs{randn({2, 3}, 10)}; },
        [](const Inputs& x) { return ops::clone(x[0]); });
  t.add("clone of a transpose view", "[3, 4]^T", [] { return Inputs{randn({3, 4}, 11)}; },
        [](const Inputs& x) { return ops::clone(ops::transpose(x[0], 0, 1)); });
  t.add("clone used twice", "[4]", [] { return Inputs{randn({4}, 12)}; },
        [](const Inputs& x) {
          Tensor c = ops::clone(x[0]);
          return ops::mul(c, c);
        });

  t.add("reshape contiguous", "[2, 3, 4] -> [6, 4]", [] { return Inputs{randn({2, 3, 4}, 20)}; },
        [](const Inputs& x) { return ops::reshape(x[0], {6, 4}); });
  t.add("reshape with -1", "[2, 3, 4] -> [4, -1]", [] { return Inputs{randn({2, 3, 4}, 21)}; },
        [](const Inputs& x) { return ops::reshape(x[0], {4, -1}); });
  t.add("reshape of a permuted view (copies)", "[2, 3, 4] permute(2,0,1) -> [4, 6]",
        [] { return Inputs{randn({2, 3, 4}, 22)}; },
        [](const Inputs& x) { return ops::reshape(ops::permute(x[0], {2, 0, 1}), {4, 6}); });
  t.add("reshape to a scalar and back", "[1, 1] -> [] -> [1]", [] { return Inputs{randn({1, 1}, 23)}; },
        [](const Inputs& x) { return ops::reshape(ops::mul(ops::reshape(x[0], {}), ops::reshape(x[0], {})), {1}); });

  t.add("permute 3-D", "[2, 3, 4] (2, 0, 1)", [] { return Inputs{randn({2, 3, 4}, 30)}; },
        [](const Inputs& x) { return ops::permute(x[0], {2, 0, 1}); });
  t.add("permute 4-D negative axes then mul", "[2, 3, 1, 4] (-1, 0, -2, 1) * [4, 2, 1, 3]",
        [] { return Inputs{randn({2, 3, 1, 4}, 31), randn({4, 2, 1, 3}, 32)}; },
        [](const Inputs& x) { return ops::mul(ops::permute(x[0], {-1, 0, -2, 1}), x[1]); });
  t.add("permute of a permute", "[2, 3, 4] (1, 2, 0) (2, 0, 1)", [] { return Inputs{randn({2, 3, 4}, 33)}; },
        [](const Inputs& x) { return ops::exp(ops::permute(ops::permute(x[0], {1, 2, 0}), {2, 0, 1})); });

  t.add("transpose 2-D", "[3, 5]", [] { return Inputs{randn({3, 5}, 40)}; },
        [](const Inputs& x) { return ops::transpose(x[0], 0, 1); });
  t.add("transpose 3-D negative axes", "[2, 3, 4] (-1, 0)", [] { return Inputs{randn({2, 3, 4}, 41)}; },
        [](const Inputs& x) { return ops::tanh(ops::transpose(x[0], -1, 0)); });

  t.add("slice axis 0", "[5, 3] [1:4]", [] { return Inputs{randn({5, 3}, 50)}; },
        [](const Inputs& x) { return ops::slice(x[0], 0, 1, 4); });
  t.add("slice middle axis", "[2, 6, 3] axis 1 [2:5]", [] { return Inputs{randn({2, 6, 3}, 51)}; },
        [](const Inputs& x) { return ops::slice(x[0], 1, 2, 5); });
  t.add("slice negative axis, width 1", "[3, 4] axis -1 [3:4]", [] { return Inputs{randn({3, 4}, 52)}; },
        [](const Inputs& x) { return ops::slice(x[0], -1, 3, 4); });
  t.add("slice of a transpose view, twice overlapping", "[4, 5]^T [0:3] + [1:4]",
        [] { return Inputs{randn({4, 5}, 53)}; },
        [](const Inputs& x) {
          Tensor v = ops::transpose(x[0], 0, 1);
          return ops::mul(ops::slice(v, 0, 0, 3), ops::slice(v, 0, 1, 4));
        });

  t.add("view of a non-contiguous tensor without a copy", "[2, 3, 1, 1] strides (12, 4, 4, 1) -> [2, 1, 3, 1]",
        [] { return Inputs{randn({2, 12}, 54)}; },
        [](const Inputs& x) { // columns 0, 4, 8 of each row: strides (12, 4) and two size-1 axes
          Tensor v = ops::reshape(ops::slice(x[0], 1, 0, 12, 4), {2, 3, 1, 1});
          return ops::exp(ops::view(v, {2, 1, 3, 1}));
        });
  t.add("view merging axes of a slice", "[4, 6][:, 1:5] viewed [4, 2, 2] -> [4, 4]",
        [] { return Inputs{randn({4, 6}, 55)}; },
        [](const Inputs& x) { return ops::view(ops::view(ops::slice(x[0], 1, 1, 5), {4, 2, 2}), {4, 4}); });
  t.add("slice with a step and negative bounds", "[7, 3] [-6:-1:2]", [] { return Inputs{randn({7, 3}, 56)}; },
        [](const Inputs& x) { return ops::slice(x[0], 0, -6, -1, 2); });
  t.add("slice step larger than the axis, clamped stop", "[2, 5] axis -1 [1:100:7]",
        [] { return Inputs{randn({2, 5}, 57)}; },
        [](const Inputs& x) { return ops::slice(x[0], -1, 1, 100, 7); });
  t.add("slice with a step of a transpose view, used twice", "[4, 6]^T [0::2] * [1::2]",
        [] { return Inputs{randn({4, 6}, 58)}; },
        [](const Inputs& x) {
          Tensor v = ops::transpose(x[0], 0, 1);
          return ops::mul(ops::slice(v, 0, 0, 6, 2), ops::slice(v, 0, 1, 6, 2));
        });

  t.add("concat axis 0", "[2, 3] | [1, 3]", [] { return Inputs{randn({2, 3}, 60), randn({1, 3}, 61)}; },
        [](const Inputs& x) { return ops::concat({x[0], x[1]}, 0); });
  t.add("concat axis -1, three parts", "[2, 1] | [2, 3] | [2, 2]",
        [] { return Inputs{randn({2, 1}, 62), randn({2, 3}, 63), randn({2, 2}, 64)}; },
        [](const Inputs& x) { return ops::concat({x[0], x[1], x[2]}, -1); });
  t.add("concat the same tensor twice, middle axis", "[2, 3, 2] | itself",
        [] { return Inputs{randn({2, 3, 2}, 65)}; },
        [](const Inputs& x) { return ops::concat({x[0], x[0]}, 1); });
  t.add("concat a transpose view", "[3, 2]^T | [2, 4]", [] { return Inputs{randn({3, 2}, 66), randn({2, 4}, 67)}; },
        [](const Inputs& x) { return ops::concat({ops::transpose(x[0], 0, 1), x[1]}, 1); });
}

// ---- adding, removing, repeating and splitting axes ---------------------------------------------
void axes_rows(Table& t) {
  t.add("expand size-1 axes and a new leading axis", "[3, 1] -> [2, 3, 4]", [] { return Inputs{randn({3, 1}, 70)}; },
        [](const Inputs& x) { return ops::expand(x[0], {2, 3, 4}); });
  t.add("expand with -1 of a transpose view, then mul", "[1, 3]^T... [3, 1] -> [-1, 5] * [3, 5]",
        [] { return Inputs{randn({1, 3}, 71), randn({3, 5}, 72)}; },
        [](const Inputs& x) { return ops::mul(ops::expand(ops::transpose(x[0], 0, 1), {-1, 5}), x[1]); });
  t.add("squeeze every size-1 axis", "[1, 3, 1, 2] -> [3, 2]", [] { return Inputs{randn({1, 3, 1, 2}, 73)}; },
        [](const Inputs& x) { return ops::squeeze(x[0]); });
  t.add("squeeze one axis of a permuted view", "[3, 1, 2] permute(2, 1, 0) axis 1",
        [] { return Inputs{randn({3, 1, 2}, 74)}; },
        [](const Inputs& x) { return ops::exp(ops::squeeze(ops::permute(x[0], {2, 1, 0}), 1)); });
  t.add("unsqueeze then broadcast", "[3] -> [3, 1] * [3, 4]", [] { return Inputs{randn({3}, 75), randn({3, 4}, 76)}; },
        [](const Inputs& x) { return ops::mul(ops::unsqueeze(x[0], -1), x[1]); });
  t.add("unsqueeze middle axis of a transpose view", "[2, 3]^T axis 1", [] { return Inputs{randn({2, 3}, 77)}; },
        [](const Inputs& x) { return ops::unsqueeze(ops::transpose(x[0], 0, 1), 1); });
  t.add("stack three on a new last axis", "3 x [2, 3] axis -1",
        [] { return Inputs{randn({2, 3}, 78), randn({2, 3}, 79), randn({2, 3}, 80)}; },
        [](const Inputs& x) { return ops::stack({x[0], x[1], x[2]}, -1); });
  t.add("stack the same tensor twice", "x, x [3] axis 0", [] { return Inputs{randn({3}, 81)}; },
        [](const Inputs& x) { return ops::stack({x[0], x[0]}, 0); });
  // split and chunk return pieces: joined again in reverse order, so each piece's gradient must
  // land back in its own place
  auto reversed = [](std::vector<Tensor> parts, int axis) { return ops::concat({parts.rbegin(), parts.rend()}, axis); };
  t.add("split by size, last piece shorter", "[5, 2] size 2 axis 0", [] { return Inputs{randn({5, 2}, 82)}; },
        [reversed](const Inputs& x) { return reversed(ops::split(x[0], 2, 0), 0); });
  t.add("split by sizes with an empty piece", "[2, 6] sizes (1, 0, 5) axis 1", [] { return Inputs{randn({2, 6}, 83)}; },
        [reversed](const Inputs& x) { return reversed(ops::split(x[0], std::vector<std::int64_t>{1, 0, 5}, 1), 1); });
  t.add("chunk into fewer pieces than asked", "[6, 2] 4 chunks -> 3", [] { return Inputs{randn({6, 2}, 84)}; },
        [reversed](const Inputs& x) { return reversed(ops::chunk(x[0], 4, 0), 0); });
  t.add("chunk of a transpose view", "[3, 5]^T 2 chunks axis 0", [] { return Inputs{randn({3, 5}, 85)}; },
        [reversed](const Inputs& x) { return reversed(ops::chunk(ops::transpose(x[0], 0, 1), 2, 0), 0); });
}

// ---- binary elementwise -------------------------------------------------------------------------
template <typename Op> void binary_rows(Table& t, const char* name, const char* sym, Op op, bool div_like) {
  const std::uint64_t base = 100 + 20 * static_cast<std::uint64_t>(name[0] + name[1]);
  // The second operand of div is kept away from 0 (it is a divisor).
  auto rhs = [div_like](const Dims& s, std::uint64_t seed) { return div_like ? positive(s, seed) : randn(s, seed); };
  const std::string n(name), sy(sym);
  t.add(n + " same shape", "[2, 3] " + sy + " [2, 3]", [=] { return Inputs{randn({2, 3}, base), rhs({2, 3}, base + 1)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " broadcast both operands", "[2, 1, 3] " + sy + " [4, 1]",
        [=] { return Inputs{randn({2, 1, 3}, base + 2), rhs({4, 1}, base + 3)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " size-1 dims", "[1, 3] " + sy + " [3, 1]", [=] { return Inputs{randn({1, 3}, base + 4), rhs({3, 1}, base + 5)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " scalar operand", "[2, 3] " + sy + " []", [=] { return Inputs{randn({2, 3}, base + 6), rhs({}, base + 7)}; },
        [op](const Inputs& x) { return op(x[0], x[1]); });
  t.add(n + " non-contiguous operands", "[3, 2]^T " + sy + " [4, 3, 2] permute(0, 2, 1)",
        [=] { return Inputs{randn({3, 2}, base + 8), rhs({4, 3, 2}, base + 9)}; },
        [op](const Inputs& x) { return op(ops::transpose(x[0], 0, 1), ops::permute(x[1], {0, 2, 1})); });
  t.add(n + " same tensor twice", "x " + sy + " x, x [2, 3]",
        [=] { return Inputs{div_like ? positive({2, 3}, base + 10) : randn({2, 3}, base + 10)}; },
        [op](const Inputs& x) { return op(x[0], x[0]); });
}

void elementwise_rows(Table& t) {
  binary_rows(t, "add", "+", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); }, false);
  binary_rows(t, "sub", "-", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); }, false);
  binary_rows(t, "mul", "*", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, false);
  binary_rows(t, "div", "/", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); }, true);
  // A broadcast operand whose gradient buffer must sum over the broadcast axis, in a sub whose
  // second operand is a slice (non-zero offset).
  t.add("sub broadcast slice operand", "[3, 4] - [5, 4][1:2]", [] { return Inputs{randn({3, 4}, 190), randn({5, 4}, 191)}; },
        [](const Inputs& x) { return ops::sub(x[0], ops::slice(x[1], 0, 1, 2)); });

  // pow with a tensor exponent: the base positive (a fractional power of a negative is NaN)
  t.add("pow tensor exponent, broadcast", "[2, 3] ^ [3] (base positive)",
        [] { return Inputs{positive({2, 3}, 192), randn({3}, 193)}; },
        [](const Inputs& x) { return ops::pow(x[0], x[1]); });
  t.add("pow same tensor as base and exponent", "x ^ x, x [4] (positive)", [] { return Inputs{positive({4}, 194)}; },
        [](const Inputs& x) { return ops::pow(x[0], x[0]); });
  t.add("pow integer exponents of a negative base", "[2, 3] ^ {2, 3, 0} (transpose view)",
        [] { return Inputs{randn({3, 2}, 195)}; },
        [](const Inputs& x) {
          return ops::pow(ops::transpose(x[0], 0, 1), Tensor::from({2, 3, 0}, {3}, x[0].dtype()));
        });
  t.add("pow zero base: the exponent's gradient is 0 there", "[0, 0.5, 2] ^ [1.5, 2, 3] (exponent checked)",
        [] { return Inputs{Tensor::from({1.5, 2, 3}, {3}, DType::f64)}; },
        [](const Inputs& x) { return ops::pow(Tensor::from({0, 0.5, 2}, {3}, x[0].dtype()), x[0]); });

  t.add("where broadcast condition", "where([2, 1] mask, [2, 3], [3])",
        [] { return Inputs{randn({2, 3}, 196), randn({3}, 197)}; },
        [](const Inputs& x) {
          return ops::where(Tensor::from({1, 0}, {2, 1}, DType::bool8), x[0], x[1]);
        });
  t.add("where same tensor on both sides of a transpose view", "where([3, 2] mask, x^T, x^T * 2)",
        [] { return Inputs{randn({2, 3}, 198)}; },
        [](const Inputs& x) {
          Tensor v = ops::transpose(x[0], 0, 1);
          return ops::where(Tensor::from({1, 0, 0, 1, 1, 1}, {3, 2}, DType::bool8), v, ops::mul_scalar(v, 2.0));
        });
  t.add("masked_fill broadcast mask", "[2, 3] mask [3]", [] { return Inputs{randn({2, 3}, 199)}; },
        [](const Inputs& x) { return ops::masked_fill(x[0], Tensor::from({0, 1, 0}, {3}, DType::bool8), -2.5); });

  t.add("neg", "[2, 3]", [] { return Inputs{randn({2, 3}, 200)}; }, [](const Inputs& x) { return ops::neg(x[0]); });
  t.add("neg of a transpose view", "[3, 2]^T", [] { return Inputs{randn({3, 2}, 201)}; },
        [](const Inputs& x) { return ops::neg(ops::transpose(x[0], 0, 1)); });
  t.add("add_scalar", "[2, 3] + 1.5", [] { return Inputs{randn({2, 3}, 210)}; },
        [](const Inputs& x) { return ops::add_scalar(x[0], 1.5); });
  t.add("add_scalar of a permuted view, used twice", "[2, 3, 4] permute(1, 2, 0) + 0.25",
        [] { return Inputs{randn({2, 3, 4}, 211)}; },
        [](const Inputs& x) {
          Tensor y = ops::add_scalar(ops::permute(x[0], {1, 2, 0}), 0.25);
          return ops::mul(y, y);
        });
  t.add("mul_scalar", "[4] * -2.5", [] { return Inputs{randn({4}, 220)}; },
        [](const Inputs& x) { return ops::mul_scalar(x[0], -2.5); });
  t.add("mul_scalar scalar tensor", "[] * 3", [] { return Inputs{randn({}, 221)}; },
        [](const Inputs& x) { return ops::mul_scalar(x[0], 3.0); });
  t.add("rsub_scalar", "2 - [3, 2]", [] { return Inputs{randn({3, 2}, 230)}; },
        [](const Inputs& x) { return ops::rsub_scalar(x[0], 2.0); });
  t.add("rsub_scalar of a transpose view", "1 - [2, 3]^T", [] { return Inputs{randn({2, 3}, 231)}; },
        [](const Inputs& x) { return ops::rsub_scalar(ops::transpose(x[0], 0, 1), 1.0); });
  t.add("rdiv_scalar", "3 / [2, 3] (positive)", [] { return Inputs{positive({2, 3}, 240)}; },
        [](const Inputs& x) { return ops::rdiv_scalar(x[0], 3.0); });
  t.add("rdiv_scalar of a transpose view, negative numerator", "-1.5 / [3, 2]^T", [] { return Inputs{positive({3, 2}, 241)}; },
        [](const Inputs& x) { return ops::rdiv_scalar(ops::transpose(x[0], 0, 1), -1.5); });
}

// ---- unary math ---------------------------------------------------------------------------------
void unary_rows(Table& t) {
  t.add("exp", "[2, 3]", [] { return Inputs{randn({2, 3}, 300)}; }, [](const Inputs& x) { return ops::exp(x[0]); });
  t.add("exp of a transpose view", "[4, 3]^T", [] { return Inputs{randn({4, 3}, 301)}; },
        [](const Inputs& x) { return ops::exp(ops::transpose(x[0], 0, 1)); });
  t.add("log", "[2, 3] (positive)", [] { return Inputs{positive({2, 3}, 310)}; },
        [](const Inputs& x) { return ops::log(x[0]); });
  t.add("log of exp (composite)", "[5]", [] { return Inputs{randn({5}, 311)}; },
        [](const Inputs& x) { return ops::log(ops::add_scalar(ops::exp(x[0]), 1.0)); });
  t.add("sqrt", "[2, 3] (positive)", [] { return Inputs{positive({2, 3}, 320)}; },
        [](const Inputs& x) { return ops::sqrt(x[0]); });
  t.add("sqrt of a permuted view", "[2, 3, 2] permute(2, 1, 0) (positive)", [] { return Inputs{positive({2, 3, 2}, 321)}; },
        [](const Inputs& x) { return ops::sqrt(ops::permute(x[0], {2, 1, 0})); });
  t.add("pow 2", "[2, 3]", [] { return Inputs{randn({2, 3}, 330)}; }, [](const Inputs& x) { return ops::pow(x[0], 2.0); });
  t.add("pow 3", "[3, 2]", [] { return Inputs{randn({3, 2}, 331)}; }, [](const Inputs& x) { return ops::pow(x[0], 3.0); });
  t.add("pow 0.5", "[4] (positive)", [] { return Inputs{positive({4}, 332)}; },
        [](const Inputs& x) { return ops::pow(x[0], 0.5); });
  t.add("pow -1", "[2, 2] (positive)", [] { return Inputs{positive({2, 2}, 333)}; },
        [](const Inputs& x) { return ops::pow(x[0], -1.0); });
  t.add("pow 0", "[3]", [] { return Inputs{positive({3}, 334)}; }, [](const Inputs& x) { return ops::pow(x[0], 0.0); });
  t.add("tanh", "[2, 4]", [] { return Inputs{randn({2, 4}, 340)}; }, [](const Inputs& x) { return ops::tanh(x[0]); });
  t.add("tanh large inputs", "[6] (N(0, 9))", [] { return Inputs{ops::mul_scalar(randn({6}, 341), 3.0)}; },
        [](const Inputs& x) { return ops::tanh(x[0]); });
  t.add("relu", "[3, 4] (|x| >= 0.1)", [] { return Inputs{away_from_zero({3, 4}, 350)}; },
        [](const Inputs& x) { return ops::relu(x[0]); });
  t.add("relu of a transpose view", "[4, 3]^T (|x| >= 0.1)", [] { return Inputs{away_from_zero({4, 3}, 351)}; },
        [](const Inputs& x) { return ops::relu(ops::transpose(x[0], 0, 1)); });
  t.add("gelu tanh", "[3, 4]", [] { return Inputs{ops::mul_scalar(randn({3, 4}, 360), 2.0)}; },
        [](const Inputs& x) { return ops::gelu(x[0], ops::GeluApproximate::tanh); });
  t.add("gelu tanh 3-D", "[2, 2, 3]", [] { return Inputs{randn({2, 2, 3}, 361)}; },
        [](const Inputs& x) { return ops::gelu(x[0], ops::GeluApproximate::tanh); });
  t.add("gelu erf", "[3, 4]", [] { return Inputs{ops::mul_scalar(randn({3, 4}, 362), 2.0)}; },
        [](const Inputs& x) { return ops::gelu(x[0]); });
  t.add("gelu erf of a transpose view", "[4, 3]^T (N(0, 9))", [] { return Inputs{ops::mul_scalar(randn({4, 3}, 363), 3.0)}; },
        [](const Inputs& x) { return ops::gelu(ops::transpose(x[0], 0, 1), ops::GeluApproximate::none); });
  t.add("abs", "[3, 4] (|x| >= 0.1)", [] { return Inputs{away_from_zero({3, 4}, 370)}; },
        [](const Inputs& x) { return ops::abs(x[0]); });
  t.add("abs of a transpose view", "[2, 3]^T (|x| >= 0.1)", [] { return Inputs{away_from_zero({2, 3}, 371)}; },
        [](const Inputs& x) { return ops::abs(ops::transpose(x[0], 0, 1)); });
  t.add("sigmoid", "[2, 4] (N(0, 9))", [] { return Inputs{ops::mul_scalar(randn({2, 4}, 372), 3.0)}; },
        [](const Inputs& x) { return ops::sigmoid(x[0]); });
  // values 0.1 or more away from the bounds, so a perturbation never crosses one
  t.add("clamp both bounds", "[3, 4] to [-0.5, 0.45]", [] { return Inputs{away_from(randn({3, 4}, 373), {-0.5, 0.45})}; },
        [](const Inputs& x) { return ops::clamp(x[0], -0.5, 0.45); });
  t.add("clamp min only of a permuted view", "[2, 3, 2] permute(2, 0, 1) min 0.05",
        [] { return Inputs{away_from(randn({2, 3, 2}, 374), {0.05})}; },
        [](const Inputs& x) { return ops::clamp(ops::permute(x[0], {2, 0, 1}), 0.05, std::nullopt); });
  t.add("clamp max only", "[5] max -0.25", [] { return Inputs{away_from(randn({5}, 375), {-0.25})}; },
        [](const Inputs& x) { return ops::clamp(x[0], std::nullopt, -0.25); });
}

// ---- reductions ---------------------------------------------------------------------------------
void reduce_rows(Table& t) {
  t.add("sum all axes", "[2, 3, 4] -> []", [] { return Inputs{randn({2, 3, 4}, 400)}; },
        [](const Inputs& x) { return ops::sum(x[0]); });
  t.add("sum one axis", "[2, 3, 4] axis 1", [] { return Inputs{randn({2, 3, 4}, 401)}; },
        [](const Inputs& x) { return ops::sum(x[0], {1}); });
  t.add("sum several axes", "[2, 3, 4] axes (0, 2)", [] { return Inputs{randn({2, 3, 4}, 402)}; },
        [](const Inputs& x) { return ops::sum(x[0], {0, 2}); });
  t.add("sum keepdim", "[2, 3, 4] axes (0, 2) keepdim", [] { return Inputs{randn({2, 3, 4}, 403)}; },
        [](const Inputs& x) { return ops::sum(x[0], {0, 2}, true); });
  t.add("sum negative axis", "[3, 4] axis -1", [] { return Inputs{randn({3, 4}, 404)}; },
        [](const Inputs& x) { return ops::sum(x[0], {-1}); });
  t.add("sum of a transpose view keepdim", "[3, 4]^T axis 0 keepdim", [] { return Inputs{randn({3, 4}, 405)}; },
        [](const Inputs& x) { return ops::sum(ops::transpose(x[0], 0, 1), {0}, true); });
  t.add("sum over a size-1 axis", "[3, 1, 2] axis 1", [] { return Inputs{randn({3, 1, 2}, 406)}; },
        [](const Inputs& x) { return ops::sum(x[0], {1}); });
  t.add("mean all axes", "[3, 4] -> []", [] { return Inputs{randn({3, 4}, 410)}; },
        [](const Inputs& x) { return ops::mean(x[0]); });
  t.add("mean one axis keepdim", "[2, 3, 4] axis 2 keepdim", [] { return Inputs{randn({2, 3, 4}, 411)}; },
        [](const Inputs& x) { return ops::mean(x[0], {2}, true); });
  t.add("mean several axes, negative", "[2, 3, 4] axes (-1, 0)", [] { return Inputs{randn({2, 3, 4}, 412)}; },
        [](const Inputs& x) { return ops::mean(x[0], {-1, 0}); });
  t.add("mean of a permuted view", "[2, 3, 4] permute(2, 0, 1) axis 1", [] { return Inputs{randn({2, 3, 4}, 413)}; },
        [](const Inputs& x) { return ops::mean(ops::permute(x[0], {2, 0, 1}), {1}); });
  t.add("max last axis", "[3, 5] axis -1", [] { return Inputs{distinct({3, 5}, 420)}; },
        [](const Inputs& x) { return ops::max(x[0], -1); });
  t.add("max axis 0 keepdim", "[4, 3] axis 0 keepdim", [] { return Inputs{distinct({4, 3}, 421)}; },
        [](const Inputs& x) { return ops::max(x[0], 0, true); });
  t.add("max middle axis", "[2, 4, 3] axis 1", [] { return Inputs{distinct({2, 4, 3}, 422)}; },
        [](const Inputs& x) { return ops::max(x[0], 1); });
  t.add("max of a transpose view", "[5, 3]^T axis 1", [] { return Inputs{distinct({5, 3}, 423)}; },
        [](const Inputs& x) { return ops::max(ops::transpose(x[0], 0, 1), 1); });
  t.add("min last axis", "[3, 5] axis -1", [] { return Inputs{distinct({3, 5}, 424)}; },
        [](const Inputs& x) { return ops::min(x[0], -1); });
  t.add("min of a transpose view keepdim", "[4, 3]^T axis 0 keepdim", [] { return Inputs{distinct({4, 3}, 425)}; },
        [](const Inputs& x) { return ops::min(ops::transpose(x[0], 0, 1), 0, true); });
  t.add("max_with_indices middle axis", "[2, 4, 3] axis 1", [] { return Inputs{distinct({2, 4, 3}, 426)}; },
        [](const Inputs& x) { return ops::max_with_indices(x[0], 1).values; });
  t.add("min_with_indices keepdim", "[3, 4] axis 0 keepdim", [] { return Inputs{distinct({3, 4}, 427)}; },
        [](const Inputs& x) { return ops::min_with_indices(x[0], 0, true).values; });
  t.add("topk largest along the last axis", "[3, 5] k 2", [] { return Inputs{distinct({3, 5}, 428)}; },
        [](const Inputs& x) { return ops::topk(x[0], 2).values; });
  t.add("topk smallest along a middle axis of a view", "[2, 3, 4] permute(0, 2, 1) k 3 axis 1",
        [] { return Inputs{distinct({2, 3, 4}, 429)}; },
        [](const Inputs& x) { return ops::topk(ops::permute(x[0], {0, 2, 1}), 3, 1, false).values; });
  t.add("var one axis", "[3, 5] axis 1", [] { return Inputs{randn({3, 5}, 435)}; },
        [](const Inputs& x) { return ops::var(x[0], {1}); });
  t.add("var all axes, correction 0, of a view", "[4, 3]^T", [] { return Inputs{randn({4, 3}, 436)}; },
        [](const Inputs& x) { return ops::var(ops::transpose(x[0], 0, 1), {}, 0); });
  t.add("std several axes keepdim", "[2, 3, 4] axes (0, 2) keepdim", [] { return Inputs{randn({2, 3, 4}, 437)}; },
        [](const Inputs& x) { return ops::std(x[0], {0, 2}, 1, true); });
  t.add("std single axis", "[4, 2] axis 0", [] { return Inputs{randn({4, 2}, 438)}; },
        [](const Inputs& x) { return ops::std(x[0], {0}); });

  t.add("sum_to trailing broadcast", "[2, 3, 4] -> [3, 1]", [] { return Inputs{randn({2, 3, 4}, 430)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {3, 1}); });
  t.add("sum_to leading and middle", "[2, 3, 4] -> [2, 1, 4]", [] { return Inputs{randn({2, 3, 4}, 431)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {2, 1, 4}); });
  t.add("sum_to a scalar", "[3, 2] -> []", [] { return Inputs{randn({3, 2}, 432)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {}); });
  t.add("sum_to same shape (identity)", "[2, 3] -> [2, 3]", [] { return Inputs{randn({2, 3}, 433)}; },
        [](const Inputs& x) { return ops::sum_to(x[0], {2, 3}); });
  t.add("sum_to of a transpose view", "[4, 3]^T -> [1, 4]", [] { return Inputs{randn({4, 3}, 434)}; },
        [](const Inputs& x) { return ops::sum_to(ops::transpose(x[0], 0, 1), {1, 4}); });
}

// ---- softmax family -----------------------------------------------------------------------------
void softmax_rows(Table& t) {
  t.add("softmax 1-D", "[5]", [] { return Inputs{randn({5}, 500)}; }, [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax 2-D", "[3, 4]", [] { return Inputs{randn({3, 4}, 501)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax 3-D", "[2, 3, 4]", [] { return Inputs{randn({2, 3, 4}, 502)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax of a transpose view", "[4, 3]^T", [] { return Inputs{randn({4, 3}, 503)}; },
        [](const Inputs& x) { return ops::softmax(ops::transpose(x[0], 0, 1)); });
  t.add("softmax large logits", "[2, 3] + 1000", [] { return Inputs{ops::add_scalar(randn({2, 3}, 504), 1000.0)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("softmax one column", "[3, 1]", [] { return Inputs{randn({3, 1}, 505)}; },
        [](const Inputs& x) { return ops::softmax(x[0]); });
  t.add("log_softmax 1-D", "[5]", [] { return Inputs{randn({5}, 510)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0]); });
  t.add("log_softmax 2-D", "[3, 4]", [] { return Inputs{randn({3, 4}, 511)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0]); });
  t.add("log_softmax 3-D", "[2, 3, 4]", [] { return Inputs{randn({2, 3, 4}, 512)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0]); });
  t.add("log_softmax of a permuted view", "[3, 2, 4] permute(1, 2, 0)", [] { return Inputs{randn({3, 2, 4}, 513)}; },
        [](const Inputs& x) { return ops::log_softmax(ops::permute(x[0], {1, 2, 0})); });
  t.add("softmax axis 0", "[4, 3] axis 0", [] { return Inputs{randn({4, 3}, 520)}; },
        [](const Inputs& x) { return ops::softmax(x[0], 0); });
  t.add("softmax middle axis of a transpose view", "[2, 4, 3]^T(0, 2) axis 1", [] { return Inputs{randn({2, 4, 3}, 521)}; },
        [](const Inputs& x) { return ops::softmax(ops::transpose(x[0], 0, 2), 1); });
  t.add("softmax axis -1 (the row kernel)", "[3, 4] axis -1", [] { return Inputs{randn({3, 4}, 522)}; },
        [](const Inputs& x) { return ops::softmax(x[0], -1); });
  t.add("log_softmax axis 0", "[5, 2] axis 0", [] { return Inputs{randn({5, 2}, 523)}; },
        [](const Inputs& x) { return ops::log_softmax(x[0], 0); });
  t.add("log_softmax middle axis, used twice", "[2, 3, 4] axis 1", [] { return Inputs{randn({2, 3, 4}, 524)}; },
        [](const Inputs& x) {
          Tensor y = ops::log_softmax(x[0], 1);
          return ops::mul(y, y);
        });
  t.add("logsumexp last axis", "[3, 4] axis -1", [] { return Inputs{randn({3, 4}, 525)}; },
        [](const Inputs& x) { return ops::logsumexp(x[0], {-1}); });
  t.add("logsumexp two axes keepdim of a view", "[3, 2, 4] permute(2, 0, 1) axes (0, 2) keepdim",
        [] { return Inputs{randn({3, 2, 4}, 526)}; },
        [](const Inputs& x) { return ops::logsumexp(ops::permute(x[0], {2, 0, 1}), {0, 2}, true); });
  t.add("logsumexp all axes, large values", "[2, 3] + 500", [] { return Inputs{ops::add_scalar(randn({2, 3}, 527), 500.0)}; },
        [](const Inputs& x) { return ops::logsumexp(x[0], {}); });
}

// ---- matmul -------------------------------------------------------------------------------------
void matmul_rows(Table& t) {
  auto mm = [](const Inputs& x) { return ops::matmul(x[0], x[1]); };
  t.add("matmul 2-D", "[3, 4] @ [4, 2]", [] { return Inputs{randn({3, 4}, 600), randn({4, 2}, 601)}; }, mm);
  t.add("matmul 1-D @ 2-D", "[4] @ [4, 3]", [] { return Inputs{randn({4}, 602), randn({4, 3}, 603)}; }, mm);
  t.add("matmul 2-D @ 1-D", "[3, 4] @ [4]", [] { return Inputs{randn({3, 4}, 604), randn({4}, 605)}; }, mm);
  t.add("matmul 1-D @ 1-D", "[5] @ [5]", [] { return Inputs{randn({5}, 606), randn({5}, 607)}; }, mm);
  t.add("matmul batched 3-D", "[2, 3, 4] @ [2, 4, 5]", [] { return Inputs{randn({2, 3, 4}, 608), randn({2, 4, 5}, 609)}; },
        mm);
  t.add("matmul batched broadcast batch dims", "[2, 1, 3, 4] @ [5, 4, 2]",
        [] { return Inputs{randn({2, 1, 3, 4}, 610), randn({5, 4, 2}, 611)}; }, mm);
  t.add("matmul batched broadcast left batch", "[3, 4] @ [2, 4, 2]", [] { return Inputs{randn({3, 4}, 612), randn({2, 4, 2}, 613)}; },
        mm);
  t.add("matmul fold path", "[2, 3, 4] @ [4, 5]", [] { return Inputs{randn({2, 3, 4}, 614), randn({4, 5}, 615)}; }, mm);
  t.add("matmul fold path, size-1 batch on b", "[3, 2, 4] @ [1, 4, 2]",
        [] { return Inputs{randn({3, 2, 4}, 616), randn({1, 4, 2}, 617)}; }, mm);
  t.add("matmul transposed left operand (Trans flag)", "[4, 3]^T @ [4, 2]",
        [] { return Inputs{randn({4, 3}, 618), randn({4, 2}, 619)}; },
        [](const Inputs& x) { return ops::matmul(ops::transpose(x[0], 0, 1), x[1]); });
  t.add("matmul transposed right operand (Trans flag)", "[3, 4] @ [2, 4]^T",
        [] { return Inputs{randn({3, 4}, 620), randn({2, 4}, 621)}; },
        [](const Inputs& x) { return ops::matmul(x[0], ops::transpose(x[1], 0, 1)); });
  t.add("matmul both transposed, batched", "[2, 4, 3]^T @ [2, 5, 4]^T",
        [] { return Inputs{randn({2, 4, 3}, 622), randn({2, 5, 4}, 623)}; },
        [](const Inputs& x) { return ops::matmul(ops::transpose(x[0], -1, -2), ops::transpose(x[1], -1, -2)); });
  t.add("matmul fold with transposed right", "[2, 3, 4] @ [5, 4]^T", [] { return Inputs{randn({2, 3, 4}, 624), randn({5, 4}, 625)}; },
        [](const Inputs& x) { return ops::matmul(x[0], ops::transpose(x[1], 0, 1)); });
  t.add("matmul scaled (alpha), batched, transposed right", "0.35 * [2, 3, 4] @ [2, 5, 4]^T",
        [] { return Inputs{randn({2, 3, 4}, 660), randn({2, 5, 4}, 661)}; },
        [](const Inputs& x) { return ops::matmul(x[0], ops::transpose(x[1], -1, -2), 0.35); });
  t.add("matmul scaled (alpha), fold path", "-1.7 * [2, 3, 4] @ [4, 5]",
        [] { return Inputs{randn({2, 3, 4}, 662), randn({4, 5}, 663)}; },
        [](const Inputs& x) { return ops::matmul(x[0], x[1], -1.7); });
  t.add("matmul expanded right operand (batch stride 0, not a shared B)", "[2, 3, 4] @ [1, 4, 2] expanded to [2, 4, 2]",
        [] { return Inputs{randn({2, 3, 4}, 664), randn({1, 4, 2}, 665)}; },
        [](const Inputs& x) { return ops::matmul(x[0], ops::expand(x[1], {2, 4, 2})); });
  t.add("matmul layout BLAS cannot read (copies)", "[3, 2, 4] permute(1, 0, 2) @ [4, 3]",
        [] { return Inputs{randn({3, 2, 4}, 626), randn({4, 3}, 627)}; },
        [](const Inputs& x) { return ops::matmul(ops::permute(x[0], {1, 0, 2}), x[1]); });
  t.add("matmul batch-transposed non-contiguous left", "[3, 2, 4] permute(1, 0, 2) @ [2, 4, 3]",
        [] { return Inputs{randn({3, 2, 4}, 628), randn({2, 4, 3}, 629)}; },
        [](const Inputs& x) { return ops::matmul(ops::permute(x[0], {1, 0, 2}), x[1]); });
  t.add("matmul same tensor twice", "x @ x^T, x [3, 4]", [] { return Inputs{randn({3, 4}, 630)}; },
        [](const Inputs& x) { return ops::matmul(x[0], ops::transpose(x[0], 0, 1)); });
  t.add("matmul 1-D @ batched 3-D", "[4] @ [2, 4, 3]", [] { return Inputs{randn({4}, 631), randn({2, 4, 3}, 632)}; }, mm);
  t.add("matmul batched 3-D @ 1-D", "[2, 3, 4] @ [4]", [] { return Inputs{randn({2, 3, 4}, 633), randn({4}, 634)}; }, mm);
  t.add("matmul size-1 dims", "[1, 4] @ [4, 1]", [] { return Inputs{randn({1, 4}, 635), randn({4, 1}, 636)}; }, mm);
  t.add("matmul 4-D both batched", "[2, 3, 2, 4] @ [2, 3, 4, 2]",
        [] { return Inputs{randn({2, 3, 2, 4}, 637), randn({2, 3, 4, 2}, 638)}; }, mm);
}

// ---- indexing -----------------------------------------------------------------------------------
void index_rows(Table& t) {
  t.add("index_select axis 0, repeated indices", "[4, 3] idx [2, 0, 2, 3, 2]",
        [] { return Inputs{randn({4, 3}, 700), ints({2, 0, 2, 3, 2}, {5})}; },
        [](const Inputs& x) { return ops::index_select(x[0], 0, x[1]); });
  t.add("index_select middle axis", "[2, 5, 3] axis 1 idx [4, 1, 1]",
        [] { return Inputs{randn({2, 5, 3}, 701), ints({4, 1, 1}, {3})}; },
        [](const Inputs& x) { return ops::index_select(x[0], 1, x[1]); });
  t.add("index_select last axis of a transpose view", "[3, 4]^T axis -1 idx [0, 2, 0]",
        [] { return Inputs{randn({3, 4}, 702), ints({0, 2, 0}, {3})}; },
        [](const Inputs& x) { return ops::index_select(ops::transpose(x[0], 0, 1), -1, x[1]); });
  t.add("gather axis 1, repeats", "[3, 4] idx [3, 2]",
        [] { return Inputs{randn({3, 4}, 710), ints({3, 3, 0, 1, 2, 2}, {3, 2})}; },
        [](const Inputs& x) { return ops::gather(x[0], 1, x[1]); });
  t.add("gather axis 0", "[3, 2] idx [4, 2]",
        [] { return Inputs{randn({3, 2}, 711), ints({0, 1, 2, 2, 1, 1, 0, 0}, {4, 2})}; },
        [](const Inputs& x) { return ops::gather(x[0], 0, x[1]); });
  t.add("gather 3-D middle axis", "[2, 3, 2] idx [2, 2, 2]",
        [] { return Inputs{randn({2, 3, 2}, 712), ints({2, 0, 1, 1, 0, 0, 2, 2}, {2, 2, 2})}; },
        [](const Inputs& x) { return ops::gather(x[0], 1, x[1]); });
  t.add("gather of log_softmax (cross-entropy pattern)", "[4, 5] idx [4, 1]",
        [] { return Inputs{randn({4, 5}, 713), ints({1, 4, 0, 1}, {4, 1})}; },
        [](const Inputs& x) { return ops::gather(ops::log_softmax(x[0]), -1, x[1]); });
  t.add("embedding 1-D tokens, repeated", "W [5, 3], tokens [6]",
        [] { return Inputs{randn({5, 3}, 720), ints({1, 4, 1, 0, 1, 4}, {6})}; },
        [](const Inputs& x) { return ops::embedding(x[0], x[1]); });
  t.add("embedding 2-D tokens", "W [4, 2], tokens [2, 3]",
        [] { return Inputs{randn({4, 2}, 721), ints({3, 0, 3, 2, 2, 3}, {2, 3})}; },
        [](const Inputs& x) { return ops::embedding(x[0], x[1]); });
}

// ---- compositions the models rely on --------------------------------------------------------------
void composite_rows(Table& t) {
  // attention-like: softmax(Q K^T / sqrt(d)) V with a transposed K.
  t.add("matmul attention composite", "Q [2, 3, 4], K [2, 5, 4], V [2, 5, 2]",
        [] { return Inputs{randn({2, 3, 4}, 800), randn({2, 5, 4}, 801), randn({2, 5, 2}, 802)}; },
        [](const Inputs& x) {
          Tensor s = ops::mul_scalar(ops::matmul(x[0], ops::transpose(x[1], -1, -2)), 0.5);
          return ops::matmul(ops::softmax(s), x[2]);
        });
  // mean and variance over the last axis (layer-norm-like), x used on several paths.
  t.add("sub mean / sqrt var composite", "[3, 5]", [] { return Inputs{randn({3, 5}, 803)}; },
        [](const Inputs& x) {
          Tensor c = ops::sub(x[0], ops::mean(x[0], {-1}, true));
          Tensor var = ops::mean(ops::mul(c, c), {-1}, true);
          return ops::div(c, ops::sqrt(ops::add_scalar(var, 1e-5)));
        });
}

} // namespace

std::vector<GradcheckCase> op_gradcheck_cases() {
  Table t;
  shape_rows(t);
  axes_rows(t);
  elementwise_rows(t);
  unary_rows(t);
  reduce_rows(t);
  softmax_rows(t);
  matmul_rows(t);
  index_rows(t);
  composite_rows(t);
  return std::move(t.rows);
}

} // namespace headgrad::cli
