#include "bench/sgemm_limit.hpp"

#include <algorithm>
#include <cblas.h>
#include <omp.h>
#include <vector>

#include "bench/timing.hpp"
#include "framework/engine/autocast.hpp"
#include "framework/engine/blas/linear_gemm.hpp"
#include "framework/engine/kernels/gemm_batched.hpp"
#include "framework/core/random.hpp"

namespace headgrad::bench {

namespace {

// Thread `part` of `parts`'s share of g when the batch's rows are split over threads (each
// training on its own rows, train/parallel/thread_replicas.hpp): the size that counts rows, divided.
GemmShape share_of(const GemmShape& g, int part, int parts) {
  GemmShape s = g;
  std::int64_t& len = g.rows_in == 'k' ? s.k : g.rows_in == 'b' ? s.batch : s.m;
  const std::int64_t all = len;
  len = all * (part + 1) / parts - all * part / parts;
  return s;
}

// The gemms of `shape` (batch of them), each on this thread with single-threaded BLAS, into
// buffers of its own.
struct GemmRun {
  GemmShape g;
  std::vector<float> A, B, C;
  GemmRun(const GemmShape& shape, Generator& gen) : g(shape) {
    A.resize(static_cast<std::size_t>(g.m * g.k * g.batch));
    B.resize(static_cast<std::size_t>(g.k * g.n * g.batch));
    C.assign(static_cast<std::size_t>(g.m * g.n * g.batch), 0.0f);
    for (auto& x : A) x = static_cast<float>(gen.uniform() - 0.5);
    for (auto& x : B) x = static_cast<float>(gen.uniform() - 0.5);
  }
  void operator()(bool bf16 = false) {
    if (g.m == 0 || g.n == 0 || g.k == 0) return;
    const std::int64_t as = g.m * g.k, bs = g.k * g.n, cs = g.m * g.n;
    if (bf16) { // one linear gemm (batch 1), as --precision bf16 runs it
      engine::bf16_linear_gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, A.data(), g.ta ? g.m : g.k, B.data(), g.tb ? g.k : g.n,
                               0.0f, C.data(), g.n);
      return;
    }
    for (std::int64_t i = 0; i < g.batch; ++i)
      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                  static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, A.data() + i * as,
                  static_cast<int>(g.ta ? g.m : g.k), B.data() + i * bs, static_cast<int>(g.tb ? g.k : g.n), 0.0f,
                  C.data() + i * cs, static_cast<int>(g.n));
  }
};

} // namespace

SgemmLimit measure_sgemm_limit(const train::RunConfig& c, double min_seconds, int threads, bool bf16) {
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
    std::vector<engine::BatchOffsets> offs;
    for (std::int64_t i = 0; i < g.batch; ++i) offs.push_back({i * a_size, i * b_size, i * c_size});
    auto headgrad_split = [&] { // over OpenMP threads, as the framework runs it
      engine::gemm_batched(g.ta, g.tb, g.m, g.n, g.k, 1.0f, A.data(), lda, Bm.data(), ldb, 0.0f, C.data(), ldc,
                           offs.data(), static_cast<std::int64_t>(offs.size()), true);
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
    const bool as_bf16 = bf16 && g.batch == 1; // a linear layer's gemm (attention's stay float32)
    double best = 1e30;
    std::vector<GemmRun> runs;
    if (threads > 1)
      for (int p = 0; p < threads; ++p) runs.emplace_back(share_of(g, p, threads), gen);
    if (as_bf16) {
      // every operand rounded once, beforehand (the guard's copies): the gemms read bf16 only
      std::vector<runtime::WeightBuffer> operands = {{A.data(), a_size}, {Bm.data(), b_size}};
      for (const GemmRun& r : runs) {
        operands.push_back({r.A.data(), static_cast<std::int64_t>(r.A.size())});
        operands.push_back({r.B.data(), static_cast<std::int64_t>(r.B.size())});
      }
      const runtime::Autocast rounded(operands);
      best = time_best([&] { // oneDNN's blocks over the OpenMP threads (linear_gemm.hpp)
        engine::bf16_linear_gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, A.data(), lda, Bm.data(), ldb, 0.0f, C.data(), ldc);
      });
      if (threads > 1)
        best = std::min(best, time_best([&] {
#pragma omp parallel for num_threads(threads) schedule(static, 1)
                          for (int p = 0; p < threads; ++p) runs[static_cast<std::size_t>(p)](true);
                        }));
    } else {
      openblas_set_num_threads(threads);
      best = time_best(blas_threads);
      openblas_set_num_threads(1);
      best = std::min(best, time_best(headgrad_split));
      if (threads > 1) // each thread its share of the batch's rows, all at once
        best = std::min(best, time_best([&] {
#pragma omp parallel for num_threads(threads) schedule(static, 1)
                          for (int p = 0; p < threads; ++p) runs[static_cast<std::size_t>(p)]();
                        }));
    }
    openblas_set_num_threads(saved);
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
