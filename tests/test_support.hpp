// test_support.hpp - what the test files share: random tensors, closeness checks, the message of
// a thrown exception, temporary directories and whole-file reads.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/random.hpp"
#include "framework/tensor.hpp"

namespace test_support {

using headgrad::Dims;
using headgrad::DType;
using headgrad::Tensor;

// N(0, 1) values from a fixed seed (float64 unless asked otherwise).
inline Tensor randn(const Dims& shape, std::uint64_t seed, DType dtype = DType::f64) {
  headgrad::Generator g(seed);
  return Tensor::normal(shape, 0.0, 1.0, g, dtype);
}

// Every element within tol of the reference, relative to its size where that exceeds 1:
// |got - want| <= tol * max(1, |want|).
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i, ": got ", got[i], ", want ", want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * std::max(1.0, std::abs(want[i])));
  }
}
inline void check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  check_close(got.to_vector(), want, tol);
}

} // namespace test_support
