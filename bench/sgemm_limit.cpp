#include "bench/sgemm_limit.hpp"

#include <algorithm>
#include <cblas.h>
#include <vector>

#include "bench/timing.hpp"
#include "framework/kernels/gemm_batched.hpp"
#include "framework/random.hpp"

namespace headgrad::bench {

SgemmLimit measure_sgemm_limit(const train::RunConfig& c, double min_seconds, int threads) {
  SgemmLimit out;
  double step_time = 0, total_flops = 0;
  Generator gen(1234);
  for (const auto& g : model_gemm_shapes(c)) {
    // op(A) is m x k: stored (m, k) or, transposed, (k, m); op(B) is k x n likewise.
    const std::int64_t a_size = g.m * g.k, b_size = g.k * g.n, c_size = g.m * g.n;
    std::vector<float> A(static_cast<std::size_t>(a_size * g.batch)), Bm(static_cast<std::size_t>(b_size * g.batch)),
        C(static_cast<std::size_t>(c_size * g.batch), 0.0f);
    for (auto& x : A) x = static_cast<float>(gen.uniform() - 0.5);
    for (auto& x : Bm) x = static_cast<float>(gen.uniform() - 0.5);
    const int lda = static_cast<int>(g.ta ? g.m : g.k), ldb = static_cast<int>(g.tb ? g.k : g.n),
              ldc = static_cast<int>(g.n);
    auto blas_threads = [&] { // OpenBLAS threads each call itself
      for (std::int64_t i = 0; i < g.batch; ++i)
        cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                    static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, A.data() + i * a_size, lda,
                    Bm.data() + i * b_size, ldb, 0.0f, C.data() + i * c_size, ldc);
    };
    std::vector<kernels::BatchOffsets> offs;
    for (std::int64_t i = 0; i < g.batch; ++i) offs.push_back({i * a_size, i * b_size, i * c_size});
    auto headgrad_split = [&] { // over OpenMP threads, as the framework runs it
      kernels::gemm_batched(g.ta, g.tb, g.m, g.n, g.k, 1.0f, A.data(), lda, Bm.data(), ldb, 0.0f, C.data(), ldc, offs,
                            true);
    };
    auto time_best = [&](auto&& call) {
      call(); // warm-up: thread pool, caches
      double best_t = 1e30, spent = 0;
      int reps = 0;
      while (reps < 3 || (spent < min_seconds && reps < 100000)) {
        const double t0 = now_seconds();
        call();
        const double dt = now_seconds() - t0;
        best_t = std::min(best_t, dt);
        spent += dt;
        ++reps;
      }
      return best_t;
    };
    const int saved = openblas_get_num_threads();
    openblas_set_num_threads(threads);
    const double t_blas = time_best(blas_threads);
    openblas_set_num_threads(saved);
    const double best = std::min(t_blas, time_best(headgrad_split));
    const double gflops = g.flops() / best * 1e-9;
    out.shapes.push_back({g, best, gflops});
    if (gflops > out.best_gflops) {
      out.best_gflops = gflops;
      out.best_shape = g.str();
    }
    step_time += static_cast<double>(g.count) * best;
    total_flops += static_cast<double>(g.count) * g.flops();
  }
  out.mix_gflops = step_time > 0 ? total_flops / step_time * 1e-9 : 0;
  out.matmul_ms_per_step = step_time * 1e3;
  return out;
}

} // namespace headgrad::bench
