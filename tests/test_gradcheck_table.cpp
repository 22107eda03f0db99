// The gradient-check table (the rows each op family and model registers beside its code,
// framework/checks/registry.hpp): every row must pass the float64 gradcheck at its tolerances, and
// every op the public op headers declare must have rows. The ops are found in the headers and the
// rows by registration, so an op declared without rows, or a family whose rows are not registered
// (or not linked), fails here.
#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "framework/checks/registry.hpp"
#include "tests/declared_ops.hpp"

using namespace headgrad;
using namespace headgrad::checks;

namespace {

// A row's op is the first word of its name ("matmul batched 3-D" -> "matmul").
std::string op_of(const GradcheckCase& c) { return c.name.substr(0, c.name.find(' ')); }

std::set<std::string> ops_with_rows(const std::vector<GradcheckCase>& cases) {
  std::set<std::string> s;
  for (const auto& c : cases) s.insert(op_of(c));
  return s;
}

} // namespace

TEST_CASE("gradcheck table: every row passes") {
  const auto cases = gradcheck_cases();
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
  const auto ops = gradcheck_cases("ops");
  CHECK(ops.size() >= 100);
  for (const auto& c : ops) {
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
  // Row names are unique over the whole table (`--filter` finds one row by its name), and every
  // row is in a group the command's --filter documents.
  std::set<std::string> names;
  const std::set<std::string> groups = {"ops", "attention", "layers", "model"};
  const auto all = gradcheck_cases();
  for (const auto& c : all) {
    CHECK_MESSAGE(names.insert(c.name).second, "duplicate row name: " << c.name);
    CHECK_MESSAGE(groups.count(c.group) == 1, c.name << ": unknown group " << c.group);
  }
  // The order is deterministic: by family name, then in file order.
  const auto again = gradcheck_cases();
  REQUIRE(again.size() == all.size());
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(again[i].name == all[i].name);
  const auto families = check_families();
  for (std::size_t i = 1; i < families.size(); ++i) CHECK(families[i - 1].name < families[i].name);
}

TEST_CASE("gradcheck table: every op declared in ops.hpp has rows, and every op row names one") {
  const std::set<std::string> declared = test_support::ops_declared_in("framework/ops/ops.hpp");
  CHECK(declared.size() >= 50);
  const auto have = ops_with_rows(gradcheck_cases("ops"));
  for (const auto& op : declared)
    CHECK_MESSAGE(have.count(op) == 1, "ops.hpp declares " << op << " but no registered gradcheck row names it");
  // and every op row's first word is an op ops.hpp declares (catches typos like "matmull ...")
  for (const auto& op : have) CHECK_MESSAGE(declared.count(op) == 1, "a row names " << op << ", not declared in ops.hpp");
}

TEST_CASE("gradcheck table: every op declared in nn_ops.hpp has rows") {
  const std::set<std::string> declared = test_support::ops_declared_in("framework/ops/nn_ops.hpp");
  // (an op with nothing to differentiate, as sequence_mask, is listed as such by its registration)
  const std::set<std::string> no_gradient = no_gradient_ops();
  CHECK(declared.size() >= 10);
  const auto have = ops_with_rows(gradcheck_cases());
  for (const auto& op : declared)
    if (!no_gradient.count(op))
      CHECK_MESSAGE(have.count(op) == 1, "nn_ops.hpp declares " << op << " but no registered gradcheck row names it");
}

TEST_CASE("check registry: two files registering one family are refused by name") {
  // In a child process: the duplicate stays registered for the rest of the process.
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const CheckFamily family{"tests/duplicate_family", {}, nullptr};
    const RegisterChecks first(family), second(family);
    try {
      (void)check_families();
    } catch (const std::logic_error& e) {
      _exit(std::string(e.what()).find("tests/duplicate_family registered twice") != std::string::npos ? 0 : 2);
    }
    _exit(1); // not refused
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // and the real registry has no duplicate
  CHECK_NOTHROW((void)check_families());
}
