// Misuse never crashes: every public op (framework/ops/*.hpp) and every Tensor method, handed an
// undefined tensor, an empty one, another dtype, another rank or a non-contiguous layout in place
// of any one of its tensor arguments, either works or throws std::logic_error (std::invalid_argument
// is one) whose message names the function. Run under ASan + UBSan (the sanitizer build), a read
// out of bounds or a null dereference on any of these paths is a failure too.
//
// The table is checked against the headers: each function a header declares must have a row, so
// an op added without one fails here (as tests/test_gradcheck_table.cpp does for gradient rows).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/ops/promotion.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::contains;
using test_support::randn;

namespace {

using Args = std::vector<Tensor>;

struct MisuseRow {
  std::string fn;                      // as declared ("relu", "Tensor::reshape")
  Args inputs;                         // valid arguments: the call must succeed with them
  std::function<void(const Args&)> call;
  std::set<std::size_t> optional = {}; // positions where an undefined tensor is a valid argument
};

Generator& gen() {
  static Generator g(7);
  return g;
}

Tensor f32(const Dims& shape, std::uint64_t seed = 1) { return randn(shape, seed, DType::f32); }
Tensor ints(const std::vector<std::int64_t>& v, const Dims& shape) { return Tensor::from_ints(v, shape); }
Tensor bools(const std::vector<double>& v, const Dims& shape) { return Tensor::from(v, shape, DType::bool8); }
Tensor positive(const Dims& shape) { return ops::add_scalar(ops::abs(f32(shape, 5)), 0.5); }

// One row per overload (a row's fn is the declared name; overloads share it).
std::vector<MisuseRow> op_rows() {
  const Tensor x = f32({2, 3, 4}), m = f32({2, 3}), v = f32({3});
  const Tensor mask = bools({1, 0, 1, 0, 1, 0}, {2, 3});
  using namespace ops;
  std::vector<MisuseRow> r = {
      // views and copies
      {"to_dtype", {x}, [](const Args& a) { to_dtype(a[0], DType::f64); }},
      {"clone", {x}, [](const Args& a) { clone(a[0]); }},
      {"reshape", {x}, [](const Args& a) { reshape(a[0], {6, 4}); }},
      {"view", {x}, [](const Args& a) { view(a[0], {6, -1}); }},
      {"permute", {x}, [](const Args& a) { permute(a[0], {2, 0, 1}); }},
      {"transpose", {x}, [](const Args& a) { transpose(a[0], 0, 2); }},
      {"slice", {x}, [](const Args& a) { slice(a[0], 1, 0, 2); }},
      {"slice", {x}, [](const Args& a) { slice(a[0], 1, -5, 7, 2); }},
      {"concat", {m, m}, [](const Args& a) { concat({a[0], a[1]}, 1); }},
      // axes
      {"expand", {f32({1, 3})}, [](const Args& a) { expand(a[0], {2, 3}); }},
      {"squeeze", {f32({1, 3})}, [](const Args& a) { squeeze(a[0]); }},
      {"squeeze", {f32({1, 3})}, [](const Args& a) { squeeze(a[0], 0); }},
      {"unsqueeze", {m}, [](const Args& a) { unsqueeze(a[0], -1); }},
      {"stack", {m, m}, [](const Args& a) { stack({a[0], a[1]}, 0); }},
      {"split", {m}, [](const Args& a) { split(a[0], 2, 1); }},
      {"split", {m}, [](const Args& a) { split(a[0], std::vector<std::int64_t>{1, 2}, 1); }},
      {"chunk", {m}, [](const Args& a) { chunk(a[0], 2, 1); }},
      // elementwise
      {"add", {m, v}, [](const Args& a) { add(a[0], a[1]); }},
      {"sub", {m, v}, [](const Args& a) { sub(a[0], a[1]); }},
      {"mul", {m, v}, [](const Args& a) { mul(a[0], a[1]); }},
      {"div", {m, v}, [](const Args& a) { div(a[0], a[1]); }},
      {"pow", {positive({2, 3}), v}, [](const Args& a) { pow(a[0], a[1]); }},
      {"where", {mask, m, v}, [](const Args& a) { where(a[0], a[1], a[2]); }},
      {"masked_fill", {m, mask}, [](const Args& a) { masked_fill(a[0], a[1], 0.0); }},
      {"neg", {m}, [](const Args& a) { neg(a[0]); }},
      {"add_scalar", {m}, [](const Args& a) { add_scalar(a[0], 1.0); }},
      {"mul_scalar", {m}, [](const Args& a) { mul_scalar(a[0], 2.0); }},
      {"rsub_scalar", {m}, [](const Args& a) { rsub_scalar(a[0], 1.0); }},
      {"rdiv_scalar", {positive({2, 3})}, [](const Args& a) { rdiv_scalar(a[0], 1.0); }},
      // unary
      {"exp", {m}, [](const Args& a) { exp(a[0]); }},
      {"log", {positive({2, 3})}, [](const Args& a) { log(a[0]); }},
      {"sqrt", {positive({2, 3})}, [](const Args& a) { sqrt(a[0]); }},
      {"pow", {m}, [](const Args& a) { pow(a[0], 2.0); }},
      {"tanh", {m}, [](const Args& a) { tanh(a[0]); }},
      {"relu", {m}, [](const Args& a) { relu(a[0]); }},
      {"gelu", {m}, [](const Args& a) { gelu(a[0]); }},
      {"gelu", {m}, [](const Args& a) { gelu(a[0], GeluApproximate::tanh); }},
      {"abs", {m}, [](const Args& a) { abs(a[0]); }},
      {"sigmoid", {m}, [](const Args& a) { sigmoid(a[0]); }},
      {"clamp", {m}, [](const Args& a) { clamp(a[0], -0.5, 0.5); }},
      // reductions
      {"sum", {x}, [](const Args& a) { sum(a[0], {1}); }},
      {"mean", {x}, [](const Args& a) { mean(a[0], {1, 2}, true); }},
      {"var", {x}, [](const Args& a) { var(a[0], {2}); }},
      {"std", {x}, [](const Args& a) { ops::std(a[0], {}, 0); }},
      {"sum_to", {m}, [](const Args& a) { sum_to(a[0], {1, 3}); }},
      // extrema
      {"max", {x}, [](const Args& a) { max(a[0], 1); }},
      {"min", {x}, [](const Args& a) { min(a[0], -1, true); }},
      {"max_with_indices", {x}, [](const Args& a) { max_with_indices(a[0], 0); }},
      {"min_with_indices", {x}, [](const Args& a) { min_with_indices(a[0], 2); }},
      {"topk", {x}, [](const Args& a) { topk(a[0], 2); }},
      // softmax family
      {"softmax", {x}, [](const Args& a) { softmax(a[0]); }},
      {"softmax", {x}, [](const Args& a) { softmax(a[0], 1); }},
      {"log_softmax", {x}, [](const Args& a) { log_softmax(a[0]); }},
      {"log_softmax", {x}, [](const Args& a) { log_softmax(a[0], 0); }},
      {"logsumexp", {x}, [](const Args& a) { logsumexp(a[0], {1}); }},
      // matmul and indexing
      {"matmul", {m, f32({3, 4})}, [](const Args& a) { matmul(a[0], a[1]); }},
      {"matmul", {x, f32({4, 2})}, [](const Args& a) { matmul(a[0], a[1], 0.5); }},
      {"index_select", {x, ints({2, 0, 1, 2}, {4})}, [](const Args& a) { index_select(a[0], 1, a[1]); }},
      {"gather", {m, ints({0, 2, 1, 1, 0, 2}, {2, 3})}, [](const Args& a) { gather(a[0], 1, a[1]); }},
      {"embedding", {f32({5, 4}), ints({0, 4, 2}, {3})}, [](const Args& a) { embedding(a[0], a[1]); }},
      // compare.hpp
      {"eq", {m, v}, [](const Args& a) { eq(a[0], a[1]); }},
      {"ne", {m, v}, [](const Args& a) { ne(a[0], a[1]); }},
      {"lt", {m, v}, [](const Args& a) { lt(a[0], a[1]); }},
      {"le", {m, v}, [](const Args& a) { le(a[0], a[1]); }},
      {"gt", {m, v}, [](const Args& a) { gt(a[0], a[1]); }},
      {"ge", {m, v}, [](const Args& a) { ge(a[0], a[1]); }},
      {"eq", {m}, [](const Args& a) { eq(a[0], 0.0); }},
      {"ne", {m}, [](const Args& a) { ne(a[0], 0.0); }},
      {"lt", {m}, [](const Args& a) { lt(a[0], 0.0); }},
      {"le", {m}, [](const Args& a) { le(a[0], 0.0); }},
      {"gt", {m}, [](const Args& a) { gt(a[0], 0.0); }},
      {"ge", {m}, [](const Args& a) { ge(a[0], 0.0); }},
      {"logical_and", {mask, m}, [](const Args& a) { logical_and(a[0], a[1]); }},
      {"logical_or", {mask, m}, [](const Args& a) { logical_or(a[0], a[1]); }},
      {"logical_not", {mask}, [](const Args& a) { logical_not(a[0]); }},
      {"argmax", {x}, [](const Args& a) { argmax(a[0], 1); }},
      {"argmin", {x}, [](const Args& a) { argmin(a[0], -1, true); }},
      {"argmax", {x}, [](const Args& a) { argmax(a[0]); }},
      {"argmin", {x}, [](const Args& a) { argmin(a[0]); }},
      // promotion.hpp
      {"result_type", {m, v}, [](const Args& a) { result_type(a[0], a[1]); }},
      {"arithmetic_operands", {m, v}, [](const Args& a) { arithmetic_operands(a[0], a[1], "arithmetic_operands"); }},
      // sampling.hpp
      {"multinomial", {positive({2, 3})}, [](const Args& a) { multinomial(a[0], 2, true, gen()); }},
      {"multinomial", {positive({3})}, [](const Args& a) { multinomial(a[0], 2, false, gen()); }},
      {"sample_logits", {x}, [](const Args& a) { sample_logits(a[0], {}, gen()); }},
      {"sample_logits", {x}, [](const Args& a) { sample_logits(a[0], {0.5, 2}, gen()); }},
      // nn_ops.hpp
      {"masked_softmax", {x, ints({1, 3}, {2})}, [](const Args& a) { masked_softmax(a[0], a[1]); }, {1}},
      {"masked_softmax", {x, ints({1, 3, 0, 2, 4, 4}, {2, 3})}, [](const Args& a) { masked_softmax(a[0], a[1]); }, {1}},
      {"causal_softmax", {x}, [](const Args& a) { causal_softmax(a[0]); }},
      {"masked_softmax_keep", {x, bools({1, 1, 0, 1, 0, 0, 1, 1}, {2, 4})},
       [](const Args& a) { masked_softmax_keep(a[0], a[1]); }},
      {"masked_softmax", {f32({2, 2, 3, 4}), ints({1, 3}, {2}), bools(std::vector<double>(48, 1), {2, 2, 3, 4})},
       [](const Args& a) { masked_softmax(a[0], AttentionMask{a[1], true, a[2]}); }, {1, 2}},
      {"attention", {f32({2, 3, 4}, 1), f32({2, 5, 4}, 2), f32({2, 5, 4}, 3), ints({2, 5}, {2}), bools(std::vector<double>(30, 1), {2, 3, 5})},
       [](const Args& a) {
         Tensor w;
         attention(a[0], a[1], a[2], 2, {a[3], true, a[4]}, &w);
       },
       {3, 4}},
      {"self_attention", {f32({2, 3, 12}), ints({1, 3, 2, 3, 3, 1}, {2, 3})},
       [](const Args& a) { self_attention(a[0], 2, {a[1], false, Tensor()}); }, {1}},
      {"attention", {f32({2, 3, 4}, 1), f32({2, 5, 4}, 2), f32({2, 5, 4}, 3), bools(std::vector<double>(60, 1), {2, 2, 3, 5})},
       [](const Args& a) { attention(a[0], a[1], a[2], 2, {Tensor(), false, a[3]}, nullptr, 0, {0.5, &gen()}); }, {3}},
      {"self_attention", {f32({2, 3, 12}), bools(std::vector<double>(36, 1), {2, 2, 3, 3})},
       [](const Args& a) { self_attention(a[0], 2, {Tensor(), true, a[1]}, nullptr, 0, {0.25, &gen()}); }, {1}},
      {"linear", {x, f32({5, 4}), f32({5})}, [](const Args& a) { linear(a[0], a[1], a[2]); }, {2}},
      {"linear_relu", {x, f32({5, 4}), f32({5})}, [](const Args& a) { linear_relu(a[0], a[1], a[2]); }, {2}},
      {"linear_gelu", {x, f32({5, 4}), f32({5})}, [](const Args& a) { linear_gelu(a[0], a[1], a[2]); }, {2}},
      {"linear_gelu", {x, f32({5, 4}), f32({5})},
       [](const Args& a) { linear_gelu(a[0], a[1], a[2], GeluApproximate::tanh); }, {2}},
      {"layer_norm", {x, f32({4}), f32({4})}, [](const Args& a) { layer_norm(a[0], a[1], a[2]); }, {1, 2}},
      {"add_layer_norm", {x, x, f32({4}), f32({4})}, [](const Args& a) { add_layer_norm(a[0], a[1], a[2], a[3]); },
       {2, 3}},
      {"dropout", {x}, [](const Args& a) { dropout(a[0], 0.5, true, gen()); }},
      {"dropout_with_mask", {x, Tensor::ones({2, 3, 4})}, [](const Args& a) { dropout_with_mask(a[0], a[1], 0.5); }},
      {"cross_entropy", {x, ints({0, 1, 2, 3, 0, 1}, {2, 3}), mask},
       [](const Args& a) { cross_entropy(a[0], a[1], a[2]); }, {2}},
      {"cross_entropy", {x, ints({0, 1, 2, 3, 0, 1}, {2, 3}), positive({2, 3})},
       [](const Args& a) { cross_entropy(a[0], a[1], CrossEntropyOptions{a[2], 1, Reduction::none}); }, {2}},
      {"sequence_mask", {ints({1, 3}, {2})}, [](const Args& a) { sequence_mask(a[0], 4); }},
  };
  return r;
}

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
struct RefusedCall {
  std::string fn;
  std::function<void()> call;
};
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
  const std::string text = test_support::read_file(std::string(HEADGRAD_SOURCE_DIR) + "/framework/tensor.hpp");
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
  const auto rows = op_rows();
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
  for (const auto& r : op_rows()) have.insert(r.fn);
  std::size_t declared = 0;
  for (const char* header : {"framework/ops/ops.hpp", "framework/ops/compare.hpp", "framework/ops/sampling.hpp",
                             "framework/ops/nn_ops.hpp", "framework/ops/promotion.hpp"}) {
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
