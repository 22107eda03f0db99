// exercise_check.hpp - what the backprop exercises in docs/exercises/ share: autograd's gradient
// of every named tensor of a forward, and the report that compares the gradients you computed with
// them, one line per tensor (max |yours - autograd's|, PASS or FAIL), as the `cmp` lines of
// Karpathy's "become a backprop ninja" exercise (makemore part 4) and llm.c's per-tensor checks.
// You do not need to read this file to do the exercises.
#pragma once
#include <algorithm>
#include <cmath>
#include <exception>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/core/tensor.hpp"

namespace exercise {

using headgrad::Tensor;

// A tensor of the forward and the name the report gives it.
struct Named {
  std::string name;
  Tensor tensor;
};

// dL/d(tensor) for every named tensor, from one backward of the scalar `loss`. An intermediate
// tensor's gradient is dropped as soon as backward has used it, so it is copied at the moment
// backward completes it (headgrad::ObserveGradients); a leaf's is its .grad().
inline std::map<std::string, Tensor> autograd_gradients(const Tensor& loss, const std::vector<Named>& tensors) {
  std::map<std::string, Tensor> grads;
  {
    headgrad::ObserveGradients watch([&](const headgrad::TensorImpl& t, const Tensor& g) {
      for (const Named& n : tensors)
        if (n.tensor.impl() == &t && g.defined()) grads[n.name] = g.clone(); // g's buffer may be reused
    });
    loss.backward();
  }
  for (const Named& n : tensors)
    if (!grads.count(n.name) && n.tensor.grad().defined()) grads[n.name] = n.tensor.grad().clone();
  return grads;
}

// The largest |a - b| over all elements (a and b of one shape).
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

class Report {
public:
  // A tensor passes when every element is within `tolerance` of autograd's (float64 throughout).
  explicit Report(double tolerance = 1e-10) : tolerance_(tolerance) {}

  // Runs one step of your backward (under NoGradGuard: nothing you compute records a graph). An
  // exception it throws is printed; the tensors it did not compute then FAIL as "not computed".
  void step(const std::string& title, const std::function<void()>& run) {
    fmt::print("{}\n", title);
    try {
      headgrad::NoGradGuard no_grad;
      run();
    } catch (const std::exception& e) {
      fmt::print("  this step threw: {}\n", e.what());
    }
  }

  // One line: the tensor's name and autograd's shape, max |yours - autograd's|, PASS or FAIL.
  void compare(const std::string& name, const Tensor& yours, const Tensor& autograd) {
    ++tensors_;
    std::string verdict;
    bool pass = false;
    if (!yours.defined()) {
      verdict = "not computed";
    } else if (!(yours.shape() == autograd.shape())) {
      verdict = fmt::format("shape {}, autograd's is {}", yours.shape().str(), autograd.shape().str());
    } else {
      const double diff = max_abs_diff(yours.to(autograd.dtype()), autograd);
      pass = diff <= tolerance_; // false for NaN too
      verdict = fmt::format("max |diff| {:.1e}", diff);
    }
    if (!pass) ++failed_;
    fmt::print("  {:<8} {:<14} {:<36} {}\n", name, autograd.shape().str(), verdict, pass ? "PASS" : "FAIL");
  }

  // A line that is not a gradient but must hold (the written-out forward equals the library's).
  void require(const std::string& what, double diff) {
    const bool pass = diff <= tolerance_; // false for NaN too
    if (!pass) ++broken_;
    fmt::print("{}: max |diff| {:.1e}  {}\n", what, diff, pass ? "PASS" : "FAIL");
  }

  // The last line; returns the exit code: 0 only when every tensor (and every require) passed.
  int finish() const {
    if (broken_ > 0) fmt::print("the exercise itself is broken: {} check(s) of its forward FAIL\n", broken_);
    if (failed_ == 0) fmt::print("all {} tensors PASS\n", tensors_);
    else fmt::print("{} of {} tensors FAIL\n", failed_, tensors_);
    return failed_ == 0 && broken_ == 0 ? 0 : 1;
  }

private:
  double tolerance_;
  int tensors_ = 0, failed_ = 0, broken_ = 0;
};

} // namespace exercise
