// The differential test: replays tests/reference/fixtures/op_cases.safetensors - thousands of
// seeded random cases of the op API computed by PyTorch 1.13 (tests/reference/make_op_cases.py
// writes it; its docstring gives the layout) - through headgrad, without torch: every output and
// every gradient of L = sum over the float outputs of sum(out * R) must agree. Each case names its
// op as the script does ("sigmoid", "pow_scalar"), and is replayed by the call registered under that
// name beside the op's other checks (framework/checks/registry.hpp, DifferentialCall): this file
// names no op. One subcase per family of the fixture, each reporting its case count and its
// largest error; a last test holds the fixture, the registered calls and the declared ops to one
// another.
//
// Agreement, element by element (ours a, PyTorch's b):
//   - integer and bool tensors: equal; every tensor: the same dtype and shape;
//   - b NaN: a NaN; b +-inf: a the same infinity; b finite: a finite and
//     |a - b| <= atol + rtol |b|, with (atol, rtol) = (1e-12, 1e-10) for float64 and
//     (1e-5, 1e-4) for float32 - headgrad and PyTorch sum in different orders (lane sums,
//     BLAS kernels, pairwise reductions), and float32 exp/tanh differ by an ulp or two. The
//     worst |a - b| / (atol + rtol |b|) of each family is printed: below 0.1 for every family
//     but layer norm, whose float32 rows that nearly cancel come within 0.97 of the bound (there
//     PyTorch's own float32 value is off by as much, see the next rule); a wrong formula is off
//     by O(1) relative, far beyond;
//   - a case whose p has "float32_tolerance" (float32 work with a 0-d float64 operand, whose
//     gradient is a float32 sum stored as float64) uses float32's (atol, rtol) for every tensor;
//   - float32 cases carry PyTorch's float64 result b64 too: an element outside the tolerance
//     still passes if |a - b64| <= 2 |b - b64| + atol + rtol |b64|, i.e. where PyTorch's own
//     float32 value is that far from exact (layer norm of a constant row, a variance of values
//     that cancel); the count of such elements is printed;
//   - the gradient of an input is compared with the tensor under its view chain; an input L
//     does not depend on must get no gradient or an all-zero one.
// The cases avoid the documented differences (framework/ops/DERIVATIVES.md), so nothing is
// excused here; the one they encode instead, layer norm rows whose squares overflow, has PyTorch's
// layer norm of the rescaled row as its reference (make_op_cases.py's t_layer_norm).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "framework/checks/differential_calls.hpp"
#include "framework/checks/registry.hpp"
#include "framework/io/safetensors.hpp"
#include "tests/declared_ops.hpp"

using namespace headgrad;
using checks::dims_of;
using checks::dtype_named;
using checks::json;

namespace {

// ---- the fixture ------------------------------------------------------------------------------

struct Fixture {
  io::SafetensorsFile file;
  json cases;
  json families;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture x;
    x.file = io::load_safetensors(std::string(HEADGRAD_SOURCE_DIR) + "/tests/reference/fixtures/op_cases.safetensors");
    x.cases = json::parse(x.file.metadata.at("cases"));
    x.families = json::parse(x.file.metadata.at("families"));
    return x;
  }();
  return f;
}

// A fresh contiguous tensor holding the elements `ref` = [dtype, offset, shape] points at.
Tensor tensor_at(const json& ref) {
  const DType d = dtype_named(ref[0].get<std::string>());
  Dims shape;
  for (const auto& v : ref[2]) shape.push_back(v.get<std::int64_t>());
  Tensor out = Tensor::empty(shape, d);
  const auto offset = ref[1].get<std::int64_t>();
  const std::int64_t n = out.numel();
  if (d == DType::bool8) {
    const std::int64_t* src = fixture().file.at("data.i64").data<std::int64_t>() + offset;
    for (std::int64_t i = 0; i < n; ++i) out.data<bool>()[i] = src[i] != 0;
    return out;
  }
  const Tensor& data = fixture().file.at(d == DType::f32 ? "data.f32" : d == DType::f64 ? "data.f64" : "data.i64");
  REQUIRE(offset + n <= data.numel());
  if (n) std::memcpy(out.raw(), static_cast<const char*>(data.raw()) + offset * dtype_size(d), n * dtype_size(d));
  return out;
}

// The view chain of make_op_cases.py: transpose, permute, stepped slice, expand, unsqueeze.
Tensor apply_chain(Tensor t, const json& chain) {
  if (chain.is_null()) return t;
  for (const auto& step : chain) {
    const std::string k = step[0];
    if (k == "t") t = ops::transpose(t, step[1], step[2]);
    else if (k == "p") t = ops::permute(t, dims_of(step[1]));
    else if (k == "s") t = ops::slice(t, step[1], step[2], step[3], step[4]);
    else if (k == "e") t = ops::expand(t, dims_of(step[1]));
    else if (k == "u") t = ops::unsqueeze(t, step[1]);
    else throw std::invalid_argument("op_cases: unknown view step " + k);
  }
  return t;
}

// The registered calls, by the op names of the cases.
const std::map<std::string, checks::DifferentialFn>& calls() {
  static const auto c = checks::differential_calls();
  return c;
}

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;

// ---- comparing --------------------------------------------------------------------------------

struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance_for(DType d) { return d == DType::f32 ? Tolerance{1e-5, 1e-4} : Tolerance{1e-12, 1e-10}; }

// What one comparison found: a problem to report (empty if none), the worst element's
// |a - b| / (atol + rtol |b|) (<= 1 passes), and how many elements passed only by the
// float64 rule.
struct Compared {
  std::string problem;
  double ratio = 0;
  int by_float64 = 0;
};

// ours against PyTorch's `ref`; `ref64` (undefined for float64 cases) is PyTorch's float64 result
// of a float32 case. An element off by more than the tolerance still passes when it is no
// farther from the float64 value than twice PyTorch's own float32 error there, plus the
// tolerance: the element is ill-conditioned (a cancellation), and PyTorch's float32 value is
// no better an answer than ours.
Compared compare(const Tensor& ours, const Tensor& ref, const Tensor& ref64, bool float32_tolerance) {
  Compared c;
  if (!ours.defined()) return {"undefined", 0, 0};
  if (ours.dtype() != ref.dtype() || !(ours.shape() == ref.shape()))
    return {fmt::format("{} {} where PyTorch has {} {}", ours.shape(), dtype_name(ours.dtype()), ref.shape(),
                        dtype_name(ref.dtype())),
            0, 0};
  const std::vector<double> a = ours.to_vector(), b = ref.to_vector();
  const std::vector<double> b64 = ref64.defined() ? ref64.to_vector() : std::vector<double>();
  const Tolerance tol = tolerance_for(float32_tolerance ? DType::f32 : ref.dtype());
  for (std::size_t i = 0; i < a.size(); ++i) {
    bool ok;
    double ratio = 0;
    if (!is_float(ref.dtype())) ok = a[i] == b[i];
    else if (std::isnan(b[i])) ok = std::isnan(a[i]);
    else if (std::isinf(b[i])) ok = a[i] == b[i];
    else {
      ratio = std::abs(a[i] - b[i]) / (tol.atol + tol.rtol * std::abs(b[i]));
      ok = std::isfinite(a[i]) && ratio <= 1;
      if (!ok && !b64.empty() && std::isfinite(a[i]) && std::isfinite(b64[i]) &&
          std::abs(a[i] - b64[i]) <= 2 * std::abs(b[i] - b64[i]) + tol.atol + tol.rtol * std::abs(b64[i])) {
        ok = true;
        ratio = 0;
        ++c.by_float64;
      }
    }
    if (ok) c.ratio = std::max(c.ratio, ratio);
    else if (c.problem.empty())
      c.problem = fmt::format("element {} of {}: ours {:.9g}, PyTorch {:.9g}{}", i, ref.shape(), a[i], b[i],
                              b64.empty() ? "" : fmt::format(" (float64 {:.9g})", b64[i]));
  }
  return c;
}

// PyTorch's float64 result of a float32 case, when it has one (`key` is "out64" or "g64").
Tensor ref64_at(const json& c, const char* key, std::size_t k) {
  return c.contains(key) && !c[key][k].is_null() ? tensor_at(c[key][k]) : Tensor();
}

bool all_zero(const Tensor& t) {
  for (double v : t.to_vector())
    if (v != 0) return false;
  return true;
}

// What a family's replay measured: the worst ratio per float dtype, elements passed by the
// float64 rule.
struct Measured {
  double worst_f32 = 0, worst_f64 = 0;
  int by_float64 = 0;
  void add(const Compared& r, DType d) {
    (d == DType::f32 ? worst_f32 : worst_f64) = std::max(d == DType::f32 ? worst_f32 : worst_f64, r.ratio);
    by_float64 += r.by_float64;
  }
};

// Runs one case with the op `op` (the case's own unless given); returns the problems found
// (empty: agreement).
std::vector<std::string> run_case(const json& c, Measured& m, const std::string& op_override = "") {
  std::vector<std::string> problems;
  const std::string op = op_override.empty() ? c["op"].get<std::string>() : op_override;
  const auto fn = calls().find(op);
  if (fn == calls().end()) return {"no call registered for " + op};
  // a float64 0-d operand of float32 work: its gradient is a float32 sum, held to float32's tolerance
  const bool f32_tol = c["p"].value("float32_tolerance", false);
  std::set<std::size_t> no_grad;
  for (const auto& i : c["ng"]) no_grad.insert(i.get<std::size_t>());
  Inputs leaves, xs;
  for (std::size_t i = 0; i < c["in"].size(); ++i) {
    Tensor t = tensor_at(c["in"][i]);
    if (is_float(t.dtype()) && !no_grad.count(i)) t.set_requires_grad(true);
    leaves.push_back(t);
    xs.push_back(apply_chain(t, c["v"][i]));
  }
  Outputs outs;
  try {
    outs = fn->second(xs, c["p"]);
  } catch (const std::exception& e) {
    return {std::string("threw: ") + e.what()};
  }
  if (outs.size() != c["out"].size())
    return {fmt::format("{} outputs where PyTorch has {}", outs.size(), c["out"].size())};
  Tensor loss;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const Tensor ref = tensor_at(c["out"][k]);
    const Compared r = compare(outs[k], ref, ref64_at(c, "out64", k), f32_tol);
    m.add(r, ref.dtype());
    if (!r.problem.empty()) problems.push_back(fmt::format("output {}: {}", k, r.problem));
    if (!c["R"][k].is_null() && outs[k].requires_grad()) {
      const Tensor term = ops::sum(ops::mul(outs[k], tensor_at(c["R"][k])));
      loss = loss.defined() ? ops::add(loss, term) : term;
    }
  }
  if (loss.defined()) loss.backward();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!is_float(leaves[i].dtype())) continue;
    const Tensor g = leaves[i].grad();
    if (c["g"][i].is_null()) {
      if (g.defined() && !all_zero(g)) problems.push_back(fmt::format("input {}: a gradient PyTorch does not have", i));
      continue;
    }
    const Compared r = compare(g.defined() ? g : Tensor::zeros(leaves[i].shape(), leaves[i].dtype()),
                               tensor_at(c["g"][i]), ref64_at(c, "g64", i), f32_tol);
    m.add(r, leaves[i].dtype());
    if (!r.problem.empty()) problems.push_back(fmt::format("gradient of input {}: {}", i, r.problem));
  }
  return problems;
}

// Replays every case of one family: all must agree. Prints the count and the worst ratio.
void run_family(const std::string& family) {
  const Fixture& f = fixture();
  int count = 0, failed = 0, f32 = 0;
  Measured m;
  for (std::size_t n = 0; n < f.cases.size(); ++n) {
    const json& c = f.cases[n];
    if (c["f"] != family) continue;
    ++count;
    for (const auto& ref : c["in"])
      if (ref[0] == "f32") {
        ++f32;
        break;
      }
    const std::vector<std::string> problems = run_case(c, m);
    if (problems.empty()) continue;
    ++failed;
    if (failed <= 8)
      FAIL_CHECK(fmt::format("case {} {} p={} views={}: {}", n, c["op"].get<std::string>(), c["p"].dump(),
                             c["v"].dump(), fmt::join(problems, "; ")));
  }
  MESSAGE(fmt::format("{}: {} cases ({} with float32 inputs), {} failed; worst |ours - PyTorch| / tolerance: float32 "
                      "{:.3g}, float64 {:.3g}; {} elements passed by the float64 rule",
                      family, count, f32, failed, m.worst_f32, m.worst_f64, m.by_float64));
  CHECK(count == f.families.at(family).get<int>());
  CHECK(count > 0);
  CHECK(failed == 0);
}

// The families in the order the fixture has them (each case names its family).
std::vector<std::string> fixture_families() {
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const auto& c : fixture().cases)
    if (seen.insert(c["f"].get<std::string>()).second) order.push_back(c["f"].get<std::string>());
  return order;
}

// The ops a differential test must replay and cannot: every declared op but those without a
// gradient or that cannot be replayed (`exempt`) needs a registered call of its name with cases.
std::vector<std::string> ops_without_cases(const std::set<std::string>& declared, const std::set<std::string>& exempt,
                                           const std::set<std::string>& with_cases) {
  std::vector<std::string> missing;
  for (const auto& op : declared)
    if (!exempt.count(op) && !(calls().count(op) && with_cases.count(op))) missing.push_back(op);
  return missing;
}

} // namespace

TEST_CASE("differential: every family of PyTorch's cases agrees with headgrad") {
  const std::vector<std::string> families = fixture_families();
  CHECK(families.size() >= 23);
  for (const std::string& family : families)
    SUBCASE(family.c_str()) { run_family(family); }
}

TEST_CASE("differential: a wrong op fails the replay (negative control)") {
  // add's cases replayed with sub, softmax's with log_softmax, max's with min: each must fail
  const std::vector<std::pair<std::string, std::string>> swaps = {{"add", "sub"}, {"softmax", "log_softmax"}, {"max", "min"}};
  for (const auto& [op, wrong] : swaps) {
    int tried = 0, caught = 0;
    Measured m;
    for (const auto& c : fixture().cases)
      if (c["op"] == op && !c["out"][0][2].empty() && tried < 20) {
        ++tried;
        caught += run_case(c, m, wrong).empty() ? 0 : 1;
      }
    CHECK_MESSAGE(tried == 20, op);
    CHECK_MESSAGE(caught >= 15, op << " replayed as " << wrong << ": only " << caught << " of 20 cases failed");
  }
}

TEST_CASE("differential: every op of the cases has a registered call, every call has cases, every "
          "differentiable op has both") {
  const Fixture& f = fixture();
  std::set<std::string> with_cases, families;
  for (const auto& c : f.cases) {
    with_cases.insert(c["op"].get<std::string>());
    families.insert(c["f"].get<std::string>());
  }
  for (const auto& op : with_cases) CHECK_MESSAGE(calls().count(op) == 1, "the cases of " << op << " have no registered call");
  for (const auto& [op, call] : calls()) CHECK_MESSAGE(with_cases.count(op) == 1, "no case calls " << op);
  // every family the metadata counts has cases, and every case is counted
  int counted = 0;
  for (const auto& [family, n] : f.families.items()) {
    CHECK_MESSAGE(families.count(family) == 1, family);
    counted += n.get<int>();
  }
  CHECK(counted == static_cast<int>(f.cases.size()));
  CHECK(f.cases.size() >= 4000);

  // every op the op headers declare, but those without a gradient and those that cannot be
  // replayed (each registration says why), has PyTorch's cases
  std::set<std::string> exempt = checks::no_gradient_ops();
  exempt.merge(checks::not_replayed_ops());
  const std::set<std::string> declared = test_support::declared_ops();
  CHECK(declared.size() >= 75);
  for (const auto& op : exempt) CHECK_MESSAGE(declared.count(op) == 1, op << " is listed by a registration, not declared");
  for (const auto& op : ops_without_cases(declared, exempt, with_cases))
    FAIL_CHECK(op << " is declared and differentiable, but no registered call replays PyTorch's cases of it "
                  "(framework/ops/DERIVATIVES.md, \"Adding an op\")");
  // (negative control: an op declared without a call is found)
  std::set<std::string> one_more = declared;
  one_more.insert("an_op_without_cases");
  CHECK(ops_without_cases(one_more, exempt, with_cases) == std::vector<std::string>{"an_op_without_cases"});
}
