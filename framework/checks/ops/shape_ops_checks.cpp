// shape_ops_checks.cpp - the checks of the views and copies (shape_ops.cpp):
// to_dtype, clone, reshape, view, permute, transpose, slice, concat.
// Registered as "framework/ops/shape_ops" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_shape_ops_derivatives = R"(
400 | reshape / view | same elements, new shape (view: strides found for any layout they fit, never a copy)
    | `dx += dy` (viewed as x; the first time, dy's own buffer) | —
    | `shape_ops.cpp` · `reshape`, `view`, `record_reshape`; `framework/core/dims.cpp` · `view_strides`
410 | permute / transpose | strided view
    | `dx += dy` permuted back (the inverse permutation, walked in dy's memory order) | inverse order
    | `shape_ops.cpp` · `permute`; loop `framework/core/strided.hpp` · `sum_into`
420 | slice | view of `[start:stop:step]` on one axis (5-argument form: Python's bounds)
    | `dx[start:stop:step] += dy`, 0 elsewhere | axis, start, step
    | `shape_ops.cpp` · `slice`, `scatter_to_zeros`
450 | concat | `[x_0 \| x_1 \| …]` | `dx_k += dy[offset_k : offset_k + n_k]` | sizes
    | `shape_ops.cpp` · `concat`
460 | clone, contiguous, to_dtype | copy (converting) | `dx += dy` (converted back) | —
    | `shape_ops.cpp` · `clone`, `to_dtype`
)";

void shape_rows(GradcheckRows& t) {
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
}

// ---- transposes, slices, views and concatenation -----------------------------------------------
void slice_rows(GradcheckRows& t) {
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

// Views and copies: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_shape_ops_misuse_rows() {
  const Tensor x = f32({2, 3, 4}), m = f32({2, 3});
  using namespace ops;
  return {
    {"to_dtype", {x}, [](const Args& a) { to_dtype(a[0], DType::f64); }},
    {"clone", {x}, [](const Args& a) { clone(a[0]); }},
    {"reshape", {x}, [](const Args& a) { reshape(a[0], {6, 4}); }},
    {"view", {x}, [](const Args& a) { view(a[0], {6, -1}); }},
    {"permute", {x}, [](const Args& a) { permute(a[0], {2, 0, 1}); }},
    {"transpose", {x}, [](const Args& a) { transpose(a[0], 0, 2); }},
    {"slice", {x}, [](const Args& a) { slice(a[0], 1, 0, 2); }},
    {"slice", {x}, [](const Args& a) { slice(a[0], 1, -5, 7, 2); }},
    {"concat", {m, m}, [](const Args& a) { concat({a[0], a[1]}, 1); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_shape_ops_differential_calls() {
  using namespace ops;
  return {
      {"reshape", [](const Inputs& x, const json& p) { return Outputs{reshape(x[0], dims_of(p["shape"]))}; }},
      {"view", [](const Inputs& x, const json& p) { return Outputs{view(x[0], dims_of(p["shape"]))}; }},
      {"permute", [](const Inputs& x, const json& p) { return Outputs{permute(x[0], dims_of(p["order"]))}; }},
      {"transpose", [](const Inputs& x, const json& p) { return Outputs{transpose(x[0], p["a"], p["b"])}; }},
      {"slice",
       [](const Inputs& x, const json& p) {
         return Outputs{p["step"].is_null() ? slice(x[0], p["axis"], p["start"], p["stop"])
                                            : slice(x[0], p["axis"], p["start"], p["stop"], p["step"])};
       }},
      {"concat", [](const Inputs& x, const json& p) { return Outputs{concat(x, p["axis"])}; }},
      {"clone", unary_call([](const Tensor& t) { return clone(t); })},
      {"to_dtype", [](const Inputs& x, const json& p) { return Outputs{to_dtype(x[0], dtype_named(p["dtype"]))}; }},
  };
}

const RegisterChecks ops_shape_ops_registered({"framework/ops/shape_ops", {shape_rows, slice_rows}, ops_shape_ops_misuse_rows,
                                               ops_shape_ops_differential_calls, ops_shape_ops_derivatives});

} // namespace
} // namespace headgrad::checks
