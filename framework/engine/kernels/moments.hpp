// moments.hpp - mean and variance of the rows of a (rows, len) buffer, accumulated in double:
// torch.var accumulates in double for float32 too, and so must we to agree with it where the
// squares of float32 values overflow (|x| > 1.8e19) or cancel.
#pragma once
#include <cmath>
#include <cstdint>

namespace headgrad::kernels {

// mean[r] = sum_k x[r, k] / len;  var[r] = sum_k (x[r, k] - mean[r])^2 / divisor (two passes),
// or its square root (root: the standard deviation, rooted before rounding to T). divisor =
// len - correction, which may be 0 (giving inf, or NaN for a zero sum, as PyTorch).
template <typename T>
void mean_var_rows(T* var, T* mean, const T* x, std::int64_t rows, std::int64_t len, double divisor, bool root) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * len;
    double m = 0;
    for (std::int64_t k = 0; k < len; ++k) m += static_cast<double>(xr[k]);
    m /= static_cast<double>(len);
    double s = 0;
    for (std::int64_t k = 0; k < len; ++k) s += (static_cast<double>(xr[k]) - m) * (static_cast<double>(xr[k]) - m);
    mean[r] = static_cast<T>(m);
    var[r] = static_cast<T>(root ? std::sqrt(s / divisor) : s / divisor);
  }
}

} // namespace headgrad::kernels
