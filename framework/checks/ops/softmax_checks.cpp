// softmax_checks.cpp - gradient-check and misuse rows of the softmax family (softmax.cpp):
// softmax, log_softmax, logsumexp.
// Registered as "framework/ops/softmax" (framework/checks/registry.hpp); framework/ops/DERIVATIVES.md,
// "Adding an op", says what goes here.
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::checks {
namespace {

using namespace misuse;

void softmax_rows(GradcheckRows& t) {
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

// Softmax family: one row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> ops_softmax_misuse_rows() {
  const Tensor x = f32({2, 3, 4});
  using namespace ops;
  return {
    {"softmax", {x}, [](const Args& a) { softmax(a[0]); }},
    {"softmax", {x}, [](const Args& a) { softmax(a[0], 1); }},
    {"log_softmax", {x}, [](const Args& a) { log_softmax(a[0]); }},
    {"log_softmax", {x}, [](const Args& a) { log_softmax(a[0], 0); }},
    {"logsumexp", {x}, [](const Args& a) { logsumexp(a[0], {1}); }},
  };
}

const RegisterChecks ops_softmax_registered({"framework/ops/softmax", {softmax_rows},
                                             ops_softmax_misuse_rows});

} // namespace
} // namespace headgrad::checks
