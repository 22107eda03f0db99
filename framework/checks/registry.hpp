// registry.hpp - what every op family and model registers beside its code, in one place:
//   - gradient checks (float64 central differences: `headgrad gradcheck`, tests/test_gradcheck_table.cpp),
//   - misuse rows (bad tensors must be refused by name: tests/test_misuse.cpp), and the calls with an
//     argument value the op refuses (clamp with neither bound),
//   - differential calls (PyTorch's cases of the op, tests/reference/make_op_cases.py, replayed by
//     tests/test_differential.cpp),
//   - the ops' rows of framework/ops/DERIVATIVES.md (whose table is generated from them:
//     framework/checks/derivatives_table.hpp),
//   - the declared ops that need no DERIVATIVES row (composites, no gradient) or cannot be replayed.
//
// The rows of an op family live beside the family's op file (framework/checks/ops/softmax_checks.cpp
// beside softmax.cpp), those of a model beside the model (models/checks/gpt_checks.cpp), and each file
// registers them itself with a static `RegisterChecks`. These files are an OBJECT library
// (headgrad_checks) linked straight into the programs that read the registry, so the linker keeps
// every registrar; they are not part of the installed libraries, and this header is private.
// framework/ops/DERIVATIVES.md, "Adding an op", says where a new op's rows go.
#pragma once
#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/gradcheck.hpp"

namespace headgrad::checks {

// One gradient check. A row's op is the first word of its name ("matmul batched 3-D" -> matmul).
struct GradcheckCase {
  std::string group;   // "ops", "attention", "layers", "model" (`headgrad gradcheck --filter` matches it)
  std::string name;    // e.g. "matmul batched broadcast"
  std::string shapes;  // e.g. "[2, 1, 3, 4] @ [5, 4, 2]"
  // Builds fresh float64 inputs (from a fixed seed) and the function to check.
  std::function<std::vector<Tensor>()> make_inputs;
  GradcheckFn fn;
  GradcheckOptions options = {};
  // Cases that check tensors the function reads by itself (a module's weights) set this instead
  // of make_inputs/fn; it builds everything and calls gradcheck_leaves.
  std::function<GradcheckResult(const GradcheckOptions&)> run = nullptr;
};

// One call of a public function with valid arguments; the misuse test replaces each tensor
// argument in turn by a bad one (undefined, empty, other dtype, other rank, non-contiguous).
struct MisuseRow {
  std::string fn;                      // as declared ("relu", "Tensor::reshape"); overloads share it
  std::vector<Tensor> inputs;          // valid arguments: the call must succeed with them
  std::function<void(const std::vector<Tensor>&)> call;
  std::set<std::size_t> optional = {}; // positions where an undefined tensor is a valid argument
};

// A call with valid tensors and an argument value the op refuses (clamp with neither bound):
// it must throw std::invalid_argument whose message contains `message` (the op's name if empty).
struct RefusedCall {
  std::string fn; // as declared, like MisuseRow::fn
  std::function<void()> call;
  std::string message = {};
};

// What a file's row functions add to. Rows of group "ops" (framework/ops/ops.hpp's ops) by add(),
// with the default tolerances unless a row says why not; the others by push_back.
struct GradcheckRows {
  std::vector<GradcheckCase> cases;
  void push_back(GradcheckCase c) { cases.push_back(std::move(c)); }
  void add(std::string name, std::string shapes, std::function<std::vector<Tensor>()> make, GradcheckFn fn,
           GradcheckOptions opt = {}) {
    cases.push_back(GradcheckCase{"ops", std::move(name), std::move(shapes), std::move(make), std::move(fn), opt});
  }
};

// How tests/test_differential.cpp replays one op of PyTorch's cases: framework/checks/differential_calls.hpp.
struct DifferentialCall;

// What one file registers: its family's name (the file's path without "_checks.cpp", e.g.
// "framework/ops/softmax"), the functions that add its gradient-check rows, in order, the one that
// lists its misuse rows, the one that lists its differential calls, its DERIVATIVES rows (each may
// be nullptr), and the ops its header declares that have no DERIVATIVES row or no PyTorch cases.
struct CheckFamily {
  std::string name;
  std::vector<void (*)(GradcheckRows&)> gradcheck_rows = {};
  std::vector<MisuseRow> (*misuse_rows)() = nullptr;
  std::vector<DifferentialCall> (*differential_calls)() = nullptr;
  // Its rows of framework/ops/DERIVATIVES.md's table, as markdown (framework/checks/derivatives_table.hpp).
  const char* derivatives = nullptr;
  // Declared ops without a DERIVATIVES row of their own: composites, whose gradient autograd builds
  // from the ops they call, and ops with no gradient (comparisons, indices, samples).
  std::vector<std::string> composite = {};
  std::vector<std::string> no_gradient = {};
  // Differentiable ops PyTorch cannot compute the same way (their result depends on headgrad's
  // random draws); the registration says where their derivative is replayed instead.
  std::vector<std::string> not_replayed = {};
  // Its calls with a refused argument value (nullptr: none).
  std::vector<RefusedCall> (*refused_calls)() = nullptr;
};

// A static one of these in each *_checks.cpp registers its family.
struct RegisterChecks {
  explicit RegisterChecks(CheckFamily family);
};

// The registered families sorted by name (framework/... before models/...); throws
// std::logic_error if two files registered one name.
std::vector<CheckFamily> check_families();
// Every gradient-check row: by family, then in the order its file lists them.
std::vector<GradcheckCase> gradcheck_cases();
// The rows of one group ("ops": the rows of framework/ops/ops.hpp's ops).
std::vector<GradcheckCase> gradcheck_cases(const std::string& group);
// Every misuse row, in the same order.
std::vector<MisuseRow> misuse_rows();
// Every registered call with a refused argument value, in the same order.
std::vector<RefusedCall> refused_calls();
// The ops the families list as composite, with no gradient, or not replayed.
std::set<std::string> composite_ops();
std::set<std::string> no_gradient_ops();
std::set<std::string> not_replayed_ops();

struct GradcheckRow {
  const GradcheckCase* c;
  GradcheckResult result;
  double max_abs_err, max_rel_err; // over all checked inputs
};
GradcheckRow run_gradcheck_case(const GradcheckCase& c);

} // namespace headgrad::checks
