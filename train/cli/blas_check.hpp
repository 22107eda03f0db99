// blas_check.hpp - `headgrad info --check-blas`: does the active BLAS kernel compute gemm right?
//
// Choosing an OpenBLAS kernel for the user (framework/engine/runtime/startup.hpp) is only safe if the chosen kernel gives
// correct products on this CPU. This runs random gemms - all four transpose combinations, padded
// leading dimensions, alpha and beta, sizes 1..160 - in float and double, both as one BLAS call and
// through headgrad's threaded split (engine::gemm), against a plain long-double loop, and checks
// each element against twice the worst-case rounding bound of a k-term dot product:
//   |c - ref| <= 2 (k + 2) u (|alpha| sum_k |a_ik b_kj| + |beta c_ij|),  u = unit round-off
// (the factor 2 covers kernels that round alpha * a before the product, or use FMA). A wrong
// kernel misses by orders of magnitude; a right one cannot exceed it.
#pragma once
#include <cstdint>
#include <string>

namespace headgrad::cli {

struct BlasCheckResult {
  int gemms = 0;             // gemms checked (per precision, per path)
  double worst_ratio = 0;    // max over all elements of |c - ref| / bound (must be <= 1)
  std::string worst_case;    // where the worst ratio occurred
  bool ok() const { return worst_ratio <= 1.0; }
};

BlasCheckResult check_blas(int shapes, std::uint64_t seed);

} // namespace headgrad::cli
