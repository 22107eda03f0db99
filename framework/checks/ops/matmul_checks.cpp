// matmul_checks.cpp - the checks of matmul (matmul.cpp), batched and
// broadcast, and the attention-like composition the models rely on.
// Registered as "framework/ops/matmul" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/differential_calls.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

// Their rows of framework/ops/DERIVATIVES.md's table (the format: framework/checks/derivatives_table.hpp).
const char* const ops_matmul_derivatives = R"(
300 | matmul (2-D, batched, broadcast, 1-D promoted; optional scale s)
    | `C = s op(A) op(B)` per batch (s = BLAS alpha)
    | `dA += s dC op(B)ᵀ`, `dB += s op(A)ᵀ dC` (BLAS transpose flags; broadcast batches summed by `beta = 1`;
      large batches of head gemms split over threads) | A, B (as views)
    | `matmul.cpp` · `matmul_nd`; kernels `matmul_forward`, `matmul_backward_a`, `matmul_backward_b` (book loops beside the op; engine `engine/kernels/matmul.cpp`)
)";

void matmul_rows(GradcheckRows& t) {
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

// A composition the models rely on.
void attention_composite_rows(GradcheckRows& t) {
  // attention-like: softmax(Q K^T / sqrt(d)) V with a transposed K.
  t.add("matmul attention composite", "Q [2, 3, 4], K [2, 5, 4], V [2, 5, 2]",
        [] { return Inputs{randn({2, 3, 4}, 800), randn({2, 5, 4}, 801), randn({2, 5, 2}, 802)}; },
        [](const Inputs& x) {
          Tensor s = ops::mul_scalar(ops::matmul(x[0], ops::transpose(x[1], -1, -2)), 0.5);
          return ops::matmul(ops::softmax(s), x[2]);
        });
}

// Matmul: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_matmul_misuse_rows() {
  const Tensor x = f32({2, 3, 4}), m = f32({2, 3});
  using namespace ops;
  return {
    {"matmul", {m, f32({3, 4})}, [](const Args& a) { matmul(a[0], a[1]); }},
    {"matmul", {x, f32({4, 2})}, [](const Args& a) { matmul(a[0], a[1], 0.5); }},
  };
}

// PyTorch's cases of these ops (tests/reference/make_op_cases.py), as tests/test_differential.cpp replays them.
std::vector<DifferentialCall> ops_matmul_differential_calls() {
  using namespace ops;
  return {
      {"matmul", [](const Inputs& x, const json& p) { return Outputs{matmul(x[0], x[1], p["scale"])}; }},
  };
}

const RegisterChecks ops_matmul_registered({"framework/ops/matmul", {matmul_rows, attention_composite_rows}, ops_matmul_misuse_rows,
                                            ops_matmul_differential_calls, ops_matmul_derivatives});

} // namespace
} // namespace headgrad::checks
