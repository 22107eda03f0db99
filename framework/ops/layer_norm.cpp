// layer_norm.cpp - LayerNorm over the last axis, fused: one pass forward, one pass backward.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>
#include <omp.h>
#include <vector>

#include "framework/autograd.hpp"
#include "framework/kernels/vec_math.hpp"
#include "framework/ops/nn_ops.hpp"

namespace headgrad::ops {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (x.dim() < 1) throw std::invalid_argument("layer_norm: input must have at least one axis");
  const std::int64_t D = x.shape().back();
  if (!(weight.shape() == Dims{D}) || !(bias.shape() == Dims{D}))
    throw std::invalid_argument(fmt::format("layer_norm: weight {} and bias {} must both be [{}] for input {}",
                                            weight.shape(), bias.shape(), D, x.shape()));
  if (x.dtype() != weight.dtype() || x.dtype() != bias.dtype())
    throw std::invalid_argument(fmt::format("layer_norm: dtypes differ: input {} {}, weight {} {}", x.shape(),
                                            dtype_name(x.dtype()), weight.shape(), dtype_name(weight.dtype())));
  if (D == 0) throw std::invalid_argument(fmt::format("layer_norm: normalising over an empty axis, input {}", x.shape()));
  ForwardTimer timer("layer_norm");
  Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
  const std::int64_t rows = x.numel() / D;
  Tensor out = new_tensor(x.shape(), x.dtype());
  // Saved for backward: per row mean and rstd = 1 / sqrt(var + eps) (as the design notes say).
  Tensor stats = new_tensor({rows, 2}, x.dtype());
  dispatch_float(x.dtype(), "layer_norm", [&]<typename T>() {
    const T* px = xc.data<T>();
    const T* w = wc.data<T>();
    const T* b = bc.data<T>();
    T* y = out.data<T>();
    T* st = stats.data<T>();
#pragma omp parallel for schedule(static) if (rows * D >= 65536)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = px + r * D;
      const T mean = kernels::sum_lanes(xr, D) / static_cast<T>(D);
      const T var = kernels::sum_lanes_fn<T>(D, [xr, mean](std::int64_t i) { return (xr[i] - mean) * (xr[i] - mean); }) /
                    static_cast<T>(D); // biased, as torch.nn.LayerNorm
      const T rstd = T(1) / std::sqrt(var + static_cast<T>(eps));
      T* yr = y + r * D;
      for (std::int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
      st[2 * r] = mean;
      st[2 * r + 1] = rstd;
    }
  });
  // forward:  xhat = (x - mean) * rstd;  y = xhat * w + b          (per row, over D)
  // local:    dxhat_i/dx_k = rstd (delta_ik - 1/D - xhat_i xhat_k / D)
  // VJP:      g = dy * w;  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
  //           dw += sum_rows dy * xhat;  db += sum_rows dy
  // shapes:   x, y, dy, dx: (rows, D); w, b, dw, db: (D); saved stats: (rows, 2) = mean, rstd
  return record(out, "layer_norm", {xc, wc, bc}, [stats, rows, D](Node& n, const Tensor& gy) {
    bool assign = false;
    Tensor gx = n.grad_for_write(0, assign), gw = n.grad(1), gb = n.grad(2);
    Tensor xv = n.input(0), wv = n.input(1);
    dispatch_float(gy.dtype(), "layer_norm", [&]<typename T>() {
      const T* px = xv.data<T>();
      const T* w = wv.data<T>();
      const T* g = gy.data<T>();
      const T* st = stats.data<T>();
      T* dx = gx.defined() ? gx.data<T>() : nullptr;
      T* dw = gw.defined() ? gw.data<T>() : nullptr;
      T* db = gb.defined() ? gb.data<T>() : nullptr;
      // Rows are split over the threads (static schedule); each thread sums its rows' dw and db
      // contributions into its own slice of `parts`, and the slices are added in thread order
      // afterwards: deterministic for a given thread count, no atomics, one pass over x and dy.
      const bool par = rows * D >= 65536 && omp_get_max_threads() > 1 && !omp_in_parallel();
      const int nthreads = par ? omp_get_max_threads() : 1;
      std::vector<T> parts(static_cast<std::size_t>((dw || db) ? 2 * nthreads * D : 0), T(0));
#pragma omp parallel num_threads(nthreads) if (par)
      {
        const int tid = omp_get_thread_num();
        T* pw = parts.empty() ? nullptr : parts.data() + static_cast<std::size_t>(2 * tid * D);
        T* pb = pw ? pw + D : nullptr;
#pragma omp for schedule(static)
        for (std::int64_t r = 0; r < rows; ++r) {
          const T* xr = px + r * D;
          const T* gr = g + r * D;
          const T mean = st[2 * r], rstd = st[2 * r + 1];
          if (dw)
            for (std::int64_t i = 0; i < D; ++i) pw[i] += gr[i] * ((xr[i] - mean) * rstd);
          if (db)
            for (std::int64_t i = 0; i < D; ++i) pb[i] += gr[i];
          if (!dx) continue;
          // mean(g), mean(g * xhat) with g = dy * w, xhat = (x - mean) * rstd
          const T mg = kernels::sum_lanes_fn<T>(D, [gr, w](std::int64_t i) { return gr[i] * w[i]; }) / static_cast<T>(D);
          const T mgx =
              kernels::sum_lanes_fn<T>(D, [=](std::int64_t i) { return gr[i] * w[i] * ((xr[i] - mean) * rstd); }) /
              static_cast<T>(D);
          T* dr = dx + r * D;
          if (assign)
            for (std::int64_t i = 0; i < D; ++i) dr[i] = rstd * (gr[i] * w[i] - mg - (xr[i] - mean) * rstd * mgx);
          else
            for (std::int64_t i = 0; i < D; ++i) dr[i] += rstd * (gr[i] * w[i] - mg - (xr[i] - mean) * rstd * mgx);
        }
      }
      for (int t = 0; t < nthreads && !parts.empty(); ++t) {
        const T* pw = parts.data() + static_cast<std::size_t>(2 * t * D);
        if (dw)
          for (std::int64_t i = 0; i < D; ++i) dw[i] += pw[i];
        if (db)
          for (std::int64_t i = 0; i < D; ++i) db[i] += pw[D + i];
      }
    });
  });
}

} // namespace headgrad::ops
