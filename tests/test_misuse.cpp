// Misuse never crashes: every public op (framework/ops/*.hpp) and every Tensor method, handed an
// undefined tensor, an empty one, another dtype, another rank or a non-contiguous layout in place
// of any one of its tensor arguments, either works or throws std::logic_error (std::invalid_argument
// is one) whose message names the function. Run under ASan + UBSan (the sanitizer build), a read
// out of bounds or a null dereference on any of these paths is a failure too.
//
// The op rows live beside the ops (framework/checks/ops/*_checks.cpp, registered in
// framework/checks/registry.hpp); the Tensor methods' rows are below. Both are checked against the
// headers: each function a header declares must have a row, so an op added without one, or a family
// whose rows are not registered, fails here (as tests/test_gradcheck_table.cpp does for gradient rows).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "framework/checks/registry.hpp"
#include "framework/checks/row_helpers.hpp"
#include "framework/ops/ops.hpp"
#include "tests/declared_ops.hpp"

using namespace headgrad;
using namespace headgrad::checks::misuse;
using headgrad::checks::MisuseRow;
using test_support::contains;

namespace {

// Every Tensor method that takes the tensor it is called on (the factories are further down).
std::vector<MisuseRow> method_rows() {
  const Tensor x = f32({2, 3, 4});
  const Tensor one = f32({}, 3);
  return {
      {"Tensor::defined", {x}, [](const Args& a) { (void)a[0].defined(); }, {0}},
      {"Tensor::shape", {x}, [](const Args& a) { (void)a[0].shape(); }},
      {"Tensor::strides", {x}, [](const Args& a) { (void)a[0].strides(); }},
      {"Tensor::size", {x}, [](const Args& a) { (void)a[0].size(-1); }},
      {"Tensor::dim", {x}, [](const Args& a) { (void)a[0].dim(); }},
      {"Tensor::numel", {x}, [](const Args& a) { (void)a[0].numel(); }},
      {"Tensor::dtype", {x}, [](const Args& a) { (void)a[0].dtype(); }},
      {"Tensor::is_contiguous", {x}, [](const Args& a) { (void)a[0].is_contiguous(); }},
      {"Tensor::impl", {x}, [](const Args& a) { (void)a[0].impl(); }, {0}},
      {"Tensor::impl_ptr", {x}, [](const Args& a) { (void)a[0].impl_ptr(); }, {0}},
      {"Tensor::same", {x, x}, [](const Args& a) { (void)a[0].same(a[1]); }, {0, 1}},
      {"Tensor::data", {x}, [](const Args& a) { (void)a[0].data<float>(); }},
      {"Tensor::raw", {x}, [](const Args& a) { (void)a[0].raw(); }},
      {"Tensor::to_vector", {x}, [](const Args& a) { (void)a[0].to_vector(); }},
      {"Tensor::to_int_vector", {x}, [](const Args& a) { (void)a[0].to_int_vector(); }},
      {"Tensor::item", {one}, [](const Args& a) { (void)a[0].item(); }},
      {"Tensor::to", {x}, [](const Args& a) { (void)a[0].to(DType::f64); }},
      {"Tensor::contiguous", {x}, [](const Args& a) { (void)a[0].contiguous(); }},
      {"Tensor::reshape", {x}, [](const Args& a) { (void)a[0].reshape({-1}); }},
      {"Tensor::view", {x}, [](const Args& a) { (void)a[0].view({6, 4}); }},
      {"Tensor::permute", {x}, [](const Args& a) { (void)a[0].permute({1, 0, 2}); }},
      {"Tensor::transpose", {x}, [](const Args& a) { (void)a[0].transpose(0, 1); }},
      {"Tensor::slice", {x}, [](const Args& a) { (void)a[0].slice(0, 0, 1); }},
      {"Tensor::clone", {x}, [](const Args& a) { (void)a[0].clone(); }},
      {"Tensor::requires_grad", {x}, [](const Args& a) { (void)a[0].requires_grad(); }},
      {"Tensor::set_requires_grad", {f32({2, 3}, 11)}, [](const Args& a) { Tensor(a[0]).set_requires_grad(); }},
      {"Tensor::grad", {x}, [](const Args& a) { (void)a[0].grad(); }},
      {"Tensor::zero_grad", {x}, [](const Args& a) { Tensor(a[0]).zero_grad(); }},
      {"Tensor::detach", {x}, [](const Args& a) { (void)a[0].detach(); }},
      {"Tensor::is_leaf", {x}, [](const Args& a) { (void)a[0].is_leaf(); }},
      {"Tensor::backward", {ops::mul_scalar(f32({}, 12).set_requires_grad(), 2.0)},
       [](const Args& a) { a[0].backward(/*retain_graph=*/true); }},
      {"Tensor::backward",
       {x},
       [](const Args& a) {
         Tensor p = f32({2, 3, 4}).set_requires_grad();
         ops::mul_scalar(p, 2.0).backward(a[0]);
       }},
      {"Tensor::str", {x}, [](const Args& a) { (void)a[0].str(); }, {0}},
      {"make_view", {x}, [](const Args& a) { make_view(a[0], {4}, {1}, 0); }},
      {"check_defined", {x}, [](const Args& a) { check_defined(a[0], "check_defined"); }},
  };
}

// Calls with no tensor argument to break: the factories, with a shape or dtype they must refuse.
using checks::RefusedCall;
std::vector<RefusedCall> refused_calls() {
  return {
      {"Tensor::empty", [] { Tensor::empty({2, -1}); }},
      {"Tensor::zeros", [] { Tensor::zeros({-3}); }},
      {"Tensor::ones", [] { Tensor::ones({1, -1}); }},
      {"Tensor::full", [] { Tensor::full({std::int64_t{1} << 40, std::int64_t{1} << 40}, 1.0); }},
      {"Tensor::arange", [] { Tensor::arange(-2); }},
      {"Tensor::from", [] { Tensor::from({1, 2, 3}, {2, 2}); }},
      {"Tensor::from_ints", [] { Tensor::from_ints({1, 2}, {3}); }},
      {"Tensor::uniform", [] { Tensor::uniform({2}, 0, 1, gen(), DType::i64); }},
      {"Tensor::normal", [] { Tensor::normal({2}, 0, 1, gen(), DType::bool8); }},
      {"new_tensor", [] { new_tensor({-1}, DType::f32); }},
      {"concat", [] { ops::concat({}, 0); }},
      {"stack", [] { ops::stack({}, 0); }},
  };
}

// The replacements for one argument: undefined, empty, each other dtype, rank 0, one axis more and
// one fewer, the same shape with non-contiguous strides, huge values.
struct Replacement {
  std::string kind;
  Tensor value;
};
std::vector<Replacement> replacements_for(const Tensor& good) {
  std::vector<Replacement> out;
  out.push_back({"undefined", Tensor()});
  Dims empty_shape = good.dim() == 0 ? Dims{0} : good.shape();
  if (good.dim() > 0) empty_shape[0] = 0;
  out.push_back({"empty", Tensor::zeros(empty_shape, good.dtype())});
  for (DType d : {DType::f32, DType::f64, DType::i64, DType::bool8})
    if (d != good.dtype()) out.push_back({std::string("dtype ") + dtype_name(d), good.to(d)});
  const Tensor first = good.reshape({-1}).slice(0, 0, 1).reshape({});
  out.push_back({"rank 0", first});
  out.push_back({"one more axis", ops::stack({good, good}, -1)});
  if (good.dim() >= 1) out.push_back({"one axis fewer", ops::squeeze(good.slice(0, 0, 1), 0)});
  if (good.dim() >= 2) {
    // same shape, transposed strides
    const Tensor strided = good.transpose(0, -1).contiguous().transpose(0, -1);
    out.push_back({"non-contiguous", strided});
  }
  // huge values: inf in float32, indices and lengths far outside any axis
  if (is_float(good.dtype()))
    out.push_back({"huge values", ops::mul_scalar(good.to(DType::f64), -1e300).to(good.dtype())});
  else if (good.dtype() == DType::i64)
    out.push_back({"huge values", Tensor::full(good.shape(), -4611686018427387904.0, DType::i64)}); // -2^62
  return out;
}

// The name a message must contain: the declared name without its class ("Tensor::view" -> "view").
std::string bare_name(const std::string& fn) { return fn.substr(fn.rfind(':') == std::string::npos ? 0 : fn.rfind(':') + 1); }

// Calls row.call with `args`; returns "" when the outcome is acceptable, else what went wrong.
std::string misuse_outcome(const MisuseRow& row, const Args& args, bool must_throw) {
  try {
    row.call(args);
  } catch (const std::logic_error& e) { // std::invalid_argument included
    if (!contains(e.what(), bare_name(row.fn))) return std::string("the message does not name it: ") + e.what();
    return "";
  } catch (const std::exception& e) {
    return std::string("threw something other than std::logic_error: ") + e.what();
  }
  return must_throw ? "returned instead of throwing" : "";
}

void check_rows(const std::vector<MisuseRow>& rows, std::size_t& calls) {
  for (const MisuseRow& row : rows) {
    INFO(row.fn);
    // The valid call works: the row tests what it claims to.
    CHECK_MESSAGE(misuse_outcome(row, row.inputs, false) == "", row.fn << " fails on valid inputs");
    for (std::size_t i = 0; i < row.inputs.size(); ++i) {
      for (const Replacement& bad : replacements_for(row.inputs[i])) {
        Args args = row.inputs;
        args[i] = bad.value;
        const bool must_throw = bad.kind == "undefined" && !row.optional.count(i);
        const std::string outcome = misuse_outcome(row, args, must_throw);
        CHECK_MESSAGE(outcome == "", row.fn << " with argument " << i << " " << bad.kind << ": " << outcome);
        ++calls;
      }
    }
  }
}

// The functions a header declares at the start of a line ("Tensor relu(", "DType result_type(").
std::set<std::string> declared_in(const std::string& header) {
  const std::string text = test_support::read_file(std::string(HEADGRAD_SOURCE_DIR) + "/" + header);
  REQUIRE_FALSE(text.empty());
  const std::regex decl(R"(^(?:Tensor|std::vector<Tensor>|ValuesIndices|DType|std::pair<Tensor, Tensor>) ([a-z_0-9]+)\()",
                        std::regex::multiline);
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1].str());
  return out;
}

// The methods class Tensor declares (indented declarations inside the class body), as
// "Tensor::name", and the free functions tensor.hpp declares.
std::set<std::string> tensor_functions() {
  const std::string text = test_support::read_file(std::string(HEADGRAD_SOURCE_DIR) + "/framework/core/tensor.hpp");
  const auto begin = text.find("class Tensor {");
  const auto end = text.find("\n};", begin);
  REQUIRE(begin != std::string::npos);
  const std::string body = text.substr(begin, end - begin);
  const std::string pub = body.substr(0, body.find("\nprivate:"));
  const std::regex method(R"(^  (?:static |template <typename T> )?[A-Za-z_:<>&*, ]*?[ &*]([a-z_]+)\()",
                          std::regex::multiline);
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(pub.begin(), pub.end(), method); it != std::sregex_iterator(); ++it)
    out.insert("Tensor::" + (*it)[1].str());
  const std::string rest = text.substr(end);
  const std::regex free_fn(R"(^(?:inline )?(?:Tensor|void) ([a-z_]+)\()", std::regex::multiline);
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), free_fn); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1].str());
  return out;
}

} // namespace

TEST_CASE("misuse: every op refuses bad tensors by name") {
  std::size_t calls = 0;
  const auto rows = checks::misuse_rows();
  REQUIRE(rows.size() >= 100);
  check_rows(rows, calls);
  MESSAGE(rows.size() << " op rows, " << calls << " misuse calls");
}

TEST_CASE("misuse: every Tensor method refuses an undefined tensor by name") {
  std::size_t calls = 0;
  const auto rows = method_rows();
  check_rows(rows, calls);
  for (const RefusedCall& c : refused_calls()) {
    INFO(c.fn);
    const std::string what = test_support::error_of<std::invalid_argument>(c.call);
    CHECK_MESSAGE(contains(what, bare_name(c.fn)), c.fn << ": " << what);
  }
  MESSAGE(rows.size() << " method rows, " << calls << " misuse calls");
}

TEST_CASE("misuse: every argument value an op's registration lists as refused is refused by name") {
  const auto calls = checks::refused_calls();
  REQUIRE_FALSE(calls.empty());
  for (const RefusedCall& c : calls) {
    INFO(c.fn);
    const std::string what = test_support::error_of<std::invalid_argument>(c.call);
    CHECK_MESSAGE(contains(what, c.message.empty() ? bare_name(c.fn) : c.message), c.fn << ": " << what);
  }
}

TEST_CASE("misuse: the crashes reported against the library now throw") {
  Tensor p = Tensor::zeros({3}).set_requires_grad();
  CHECK(contains(test_support::error_of<std::logic_error>([&] { p.grad().to_vector(); }), "Tensor::to_vector"));
  CHECK(contains(test_support::error_of<std::invalid_argument>([] { ops::relu(Tensor()); }), "relu"));
  CHECK(contains(test_support::error_of<std::invalid_argument>([&] { ops::matmul(p, Tensor()); }), "matmul"));
  CHECK(contains(test_support::error_of<std::logic_error>([] { Tensor().backward(); }), "Tensor::backward"));
  CHECK(contains(test_support::error_of<std::logic_error>([] { (void)Tensor().shape(); }), "Tensor::shape"));
}

TEST_CASE("misuse: every function the public op headers declare has a row") {
  std::set<std::string> have;
  for (const auto& r : checks::misuse_rows()) have.insert(r.fn);
  // Every header of framework/ops/ (a new one included) but the ops' helpers, and train/sample/sampling.hpp.
  const std::vector<std::string> headers = test_support::op_headers();
  CHECK(headers.size() >= 5); // ops, nn_ops, compare, sampling, promotion
  std::size_t declared = 0;
  for (const std::string& header : headers) {
    for (const auto& fn : declared_in(header)) {
      CHECK_MESSAGE(have.count(fn) == 1, header << " declares " << fn << " but the misuse table has no row for it");
      ++declared;
    }
  }
  CHECK(declared >= 75); // distinct names; overloads share one
}

TEST_CASE("misuse: every Tensor method and tensor.hpp function has a row") {
  std::set<std::string> have;
  for (const auto& r : method_rows()) have.insert(r.fn);
  for (const auto& c : refused_calls()) have.insert(c.fn);
  have.insert("Tensor::scalar"); // any value and dtype make a valid 0-d tensor: nothing to refuse
  const auto declared = tensor_functions();
  CHECK(declared.size() >= 40);
  for (const auto& fn : declared) CHECK_MESSAGE(have.count(fn) == 1, "tensor.hpp declares " << fn << " without a row");
}

TEST_CASE("misuse: converting NaN, inf or an out-of-range float to int64 is defined") {
  // x86's conversion gives INT64_MIN for all of these, so that is what PyTorch gives there too
  const double nan = std::nan(""), inf = HUGE_VAL;
  const Tensor x = Tensor::from({nan, inf, -inf, 1e30, -1e30, 5.7, -5.7}, {7});
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  const std::vector<std::int64_t> want = {lowest, lowest, lowest, lowest, lowest, 5, -5};
  CHECK(x.to(DType::i64).to_int_vector() == want);
  CHECK(x.to_int_vector() == want);
  CHECK(Tensor::full({2}, 1e300, DType::i64).to_int_vector() == std::vector<std::int64_t>{lowest, lowest});
  CHECK(Tensor::from({nan, 0.0}, {2}, DType::bool8).to_int_vector() == std::vector<std::int64_t>{1, 0});
}
