// The gradient-check table (train/cli/gradcheck_ops.cpp, train/cli/gradcheck_models.cpp): every
// row must pass the float64 gradcheck at its tolerances, and every op in framework/ops/ops.hpp must
// have at least one row.
#include <doctest/doctest.h>

#include <chrono>
#include <regex>
#include <set>
#include <string>

#include "tests/test_support.hpp"
#include "train/cli/gradcheck_table.hpp"

using namespace headgrad;
using namespace headgrad::cli;

namespace {

// Every op declared in framework/ops/ops.hpp. Kept by hand so the list is readable here; the
// "ops.hpp" test below also parses the header, so an op added there without rows fails.
const std::vector<std::string> kOps = {
    "to_dtype", "clone", "reshape", "view", "permute", "transpose", "slice", "concat",            //
    "expand", "squeeze", "unsqueeze", "stack", "split", "chunk",                                  //
    "add", "sub", "mul", "div", "pow", "where", "masked_fill",                                    //
    "neg", "add_scalar", "mul_scalar", "rsub_scalar", "rdiv_scalar",                              //
    "exp", "log", "sqrt", "tanh", "relu", "gelu", "abs", "sigmoid", "clamp",                      //
    "sum", "mean", "var", "std", "sum_to",                                                        //
    "max", "min", "max_with_indices", "min_with_indices", "topk",                                 //
    "softmax", "log_softmax", "logsumexp",                                                        //
    "matmul",                                                                                     //
    "index_select", "gather", "embedding"};

// A row's op is the first word of its name ("matmul batched 3-D" -> "matmul").
std::string op_of(const GradcheckCase& c) { return c.name.substr(0, c.name.find(' ')); }

std::set<std::string> ops_with_rows() {
  std::set<std::string> s;
  for (const auto& c : op_gradcheck_cases()) s.insert(op_of(c));
  return s;
}

// The ops a header declares: lines "Tensor name(..." at the start of a line.
std::set<std::string> ops_declared_in(const std::string& header) {
  const std::string text = test_support::read_file(std::string(HEADGRAD_SOURCE_DIR) + "/" + header);
  REQUIRE_FALSE(text.empty());
  // "Tensor name(" at the start of a line (or the pieces of a split, or values with indices)
  const std::regex decl(R"(^(?:Tensor|std::vector<Tensor>|ValuesIndices) ([a-z_0-9]+)\()", std::regex::multiline);
  std::set<std::string> declared;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    declared.insert((*it)[1].str());
  return declared;
}

} // namespace

TEST_CASE("gradcheck table: every row passes") {
  const auto cases = all_gradcheck_cases();
  REQUIRE(!cases.empty());
  int failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& c : cases) {
    // The message names the row and gives the per-input report only when it fails.
    GradcheckRow row{};
    std::string error;
    try {
      row = run_gradcheck_case(c);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const bool ok = error.empty() && row.result.ok;
    CHECK_MESSAGE(ok, c.group << " / " << c.name << " " << c.shapes << ":\n"
                              << (error.empty() ? row.result.summary() : "threw: " + error));
    if (!ok) ++failed;
    // Sanity: a checked float input got a real report (a row where nothing was checked would
    // pass vacuously).
    if (error.empty()) {
      bool any_checked = false;
      for (const auto& r : row.result.inputs) any_checked = any_checked || r.checked;
      CHECK_MESSAGE(any_checked, c.name << ": no float input was checked");
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE(cases.size() << " gradcheck rows, " << failed << " failed, " << secs << " s");
}

TEST_CASE("gradcheck table: size, names and groups") {
  const auto ops = op_gradcheck_cases();
  CHECK(ops.size() >= 100);
  std::set<std::string> names;
  for (const auto& c : ops) {
    CHECK(c.group == "ops");
    CHECK_MESSAGE(names.insert(c.name).second, "duplicate row name: " << c.name);
    CHECK_MESSAGE(!c.shapes.empty(), c.name << ": empty shapes string");
    CHECK(c.make_inputs);
    CHECK(c.fn);
    // Tolerances stay at PyTorch's gradcheck defaults for every op row.
    CHECK_MESSAGE(c.options.atol == 1e-5, c.name);
    CHECK_MESSAGE(c.options.rtol == 1e-3, c.name);
    // Inputs are float64 (or integer indices).
    for (const auto& x : c.make_inputs())
      CHECK_MESSAGE((x.dtype() == DType::f64 || x.dtype() == DType::i64), c.name);
  }
  // all = ops then models
  CHECK(all_gradcheck_cases().size() == ops.size() + model_gradcheck_cases().size());
}

TEST_CASE("gradcheck table: every op in the list has rows") {
  const auto have = ops_with_rows();
  for (const auto& op : kOps) CHECK_MESSAGE(have.count(op) == 1, "no gradcheck row for op " << op);
  // and every row's first word is an op from the list (catches typos like "matmull ...")
  const std::set<std::string> known(kOps.begin(), kOps.end());
  for (const auto& op : have) CHECK_MESSAGE(known.count(op) == 1, "row names unknown op " << op);
}

TEST_CASE("gradcheck table: every op declared in ops.hpp has rows") {
  const std::set<std::string> declared = ops_declared_in("framework/ops/ops.hpp");
  CHECK(declared.size() >= kOps.size());
  const std::set<std::string> listed(kOps.begin(), kOps.end());
  const auto have = ops_with_rows();
  for (const auto& op : declared) {
    CHECK_MESSAGE(listed.count(op) == 1, "ops.hpp declares " << op << " but the test's list lacks it");
    CHECK_MESSAGE(have.count(op) == 1, "ops.hpp declares " << op << " but the table has no row for it");
  }
}

TEST_CASE("gradcheck table: every op declared in nn_ops.hpp has rows") {
  const std::set<std::string> declared = ops_declared_in("framework/ops/nn_ops.hpp");
  // sequence_mask builds a bool mask from integer lengths: nothing to differentiate.
  const std::set<std::string> not_differentiable = {"sequence_mask"};
  CHECK(declared.size() >= 10);
  std::set<std::string> have;
  for (const auto& c : all_gradcheck_cases()) have.insert(op_of(c));
  for (const auto& op : declared)
    if (!not_differentiable.count(op))
      CHECK_MESSAGE(have.count(op) == 1, "nn_ops.hpp declares " << op << " but the table has no row for it");
}
