// softplus.cpp - exercise 9's check of the op you add (docs/exercises.md): ops::softplus and its
// gradient, in float32 and float64, where a naive log(1 + e^x) breaks - at +-1000, where e^x
// overflows each type (x near 88.7 in float32, 709.8 in float64), at the largest finite values, and
// at large negative x, where 1 + e^x rounds to 1 - against the closed forms computed in long double.
//
//   ./dev.sh exercise softplus    builds this program against the library (with your op) and runs it
//
// Before ops::softplus is declared in framework/ops/ops.hpp the program compiles anyway and says so
// (the lookup below finds no softplus); after it, one line per input, PASS when the value and the
// gradient are within a few units in the last place of the exact ones. Exit code 0 only when all pass.
#include <cfloat>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/ops/ops.hpp"

namespace lookup {
using headgrad::Tensor;
using namespace headgrad::ops;
// True once ops::softplus(const Tensor&) is declared (found through the using-directive above).
template <typename X> concept has_softplus = requires(const X& x) { softplus(x); };
template <typename X> Tensor call_softplus(const X& x) { return softplus(x); }
} // namespace lookup

namespace {

using headgrad::Tensor;

// softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|) and its derivative sigmoid(x), exactly
// enough: in long double (L), from the forms that neither overflow nor cancel. (Templates, as the
// rest: before softplus exists nothing uses them.)
template <typename L = long double> L exact_softplus(L x) {
  return std::max(x, L(0)) + std::log1p(std::exp(-std::fabs(x)));
}
template <typename L = long double> L exact_sigmoid(L x) {
  return x >= 0 ? L(1) / (L(1) + std::exp(-x)) : std::exp(x) / (L(1) + std::exp(x));
}

// got is within 8 units in the last place of the exact value rounded to T (a NaN never is).
template <typename T> bool close(T got, long double exact) {
  const T want = static_cast<T>(exact);
  return got == want || std::abs(got - want) <= 8 * std::numeric_limits<T>::epsilon() * std::abs(want);
}

// One line per input; returns how many failed.
template <typename T, typename X> int check_type(const std::vector<T>& xs, const char* type) {
  constexpr auto dtype = sizeof(T) == 4 ? headgrad::DType::f32 : headgrad::DType::f64;
  std::vector<double> values(xs.begin(), xs.end());
  const Tensor x = Tensor::from(values, {static_cast<std::int64_t>(xs.size())}, dtype).set_requires_grad();
  const Tensor y = lookup::call_softplus(static_cast<const X&>(x));
  headgrad::ops::sum(y).backward();
  const T* yv = y.data<T>();
  const T* gv = x.grad().data<T>();
  int failed = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const long double want_y = exact_softplus<long double>(xs[i]), want_g = exact_sigmoid<long double>(xs[i]);
    const bool ok_y = close<T>(yv[i], want_y), ok_g = close<T>(gv[i], want_g);
    failed += !(ok_y && ok_g);
    fmt::print("{}  x = {:<14.7g}  softplus {:<14.7g} (exact {:<14.7g}) {}   gradient {:<12.7g} (exact {:<12.7g}) {}\n",
               type, xs[i], yv[i], static_cast<T>(want_y), ok_y ? "PASS" : "FAIL", gv[i], static_cast<T>(want_g),
               ok_g ? "PASS" : "FAIL");
  }
  return failed;
}

template <typename X> int check_softplus() {
  if constexpr (!lookup::has_softplus<X>) {
    fmt::print("ops::softplus is not declared yet (framework/ops/ops.hpp): add it, rebuild, run this again\n");
    return 1;
  } else {
    // e^x overflows float32 above 88.72 and float64 above 709.78; 1 + e^x rounds to 1 below about
    // -17 (float32) and -37 (float64)
    const std::vector<float> f32 = {-FLT_MAX, -1000.0f, -104.0f, -88.8f, -30.0f, -1.0f, 0.0f,
                                    1.0f,     30.0f,    88.7f,   89.0f,  1000.0f, FLT_MAX};
    const std::vector<double> f64 = {-DBL_MAX, -1000.0, -745.0, -100.0, -40.0, -1.0, 0.0,
                                     1.0,      40.0,    709.0,  710.0,  1000.0, DBL_MAX};
    const int failed = check_type<float, X>(f32, "float32") + check_type<double, X>(f64, "float64");
    const std::size_t n = f32.size() + f64.size();
    if (failed == 0) fmt::print("softplus and its gradient: all {} inputs PASS\n", n);
    else fmt::print("softplus and its gradient: {} of {} inputs FAIL\n", failed, n);
    return failed == 0 ? 0 : 1;
  }
}

} // namespace

int main(int argc, char** argv) {
  headgrad::runtime::configure(argc, argv);
  return check_softplus<Tensor>();
}
