#include "framework/engine/blas/linear_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fmt/format.h>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/engine/blas/onednn_matmul.hpp"
#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/gemm.hpp"

namespace headgrad::runtime {

const char* matmul_precision_name(MatmulPrecision precision) {
  return precision == MatmulPrecision::bf16 ? "bf16" : "float32";
}

void set_matmul_precision(MatmulPrecision precision) {
  if (precision == MatmulPrecision::bf16) {
    if (reference())
      throw std::logic_error("reference mode multiplies in float32 only: the matmul precision bf16 is for the engine");
    if (const std::string missing = blas::bf16_missing(); !missing.empty()) throw std::runtime_error(missing);
  }
  detail::matmul_precision_flag().store(precision, std::memory_order_relaxed);
}

namespace {

struct GemmSetting {
  Float32Gemm choice = Float32Gemm::openblas;
  std::string notice;
};
GemmSetting setting_from_environment() {
  const char* v = std::getenv("HEADGRAD_GEMM");
  if (!v || !*v) return {};
  const std::string s = v;
  if (s == "openblas") return {Float32Gemm::openblas, ""};
  if (s == "onednn") return {Float32Gemm::onednn, ""};
  if (s == "auto") return {Float32Gemm::automatic, ""};
  return {Float32Gemm::openblas,
          fmt::format("HEADGRAD_GEMM={}: not openblas, onednn or auto; float32 gemms run OpenBLAS", s)};
}
const GemmSetting& environment_setting() {
  static const GemmSetting s = setting_from_environment();
  return s;
}
std::atomic<Float32Gemm>& gemm_choice() {
  static std::atomic<Float32Gemm> choice{environment_setting().choice};
  return choice;
}

} // namespace

Float32Gemm float32_gemm() { return gemm_choice().load(std::memory_order_relaxed); }
void set_float32_gemm(Float32Gemm choice) { gemm_choice().store(choice, std::memory_order_relaxed); }
const char* float32_gemm_name(Float32Gemm choice) {
  switch (choice) {
  case Float32Gemm::openblas: return "openblas";
  case Float32Gemm::onednn: return "onednn";
  case Float32Gemm::automatic: return "auto";
  }
  return "?";
}
std::string gemm_notice() { return environment_setting().notice; }

std::string float32_gemm_summary() {
  const bool from_env = std::getenv("HEADGRAD_GEMM") && gemm_notice().empty();
  switch (float32_gemm()) {
  case Float32Gemm::openblas:
    return from_env ? "OpenBLAS's sgemm (HEADGRAD_GEMM=openblas)"
                    : "OpenBLAS's sgemm (the default; HEADGRAD_GEMM=onednn or auto chooses oneDNN's matmul)";
  case Float32Gemm::onednn: return "oneDNN's float32 matmul (HEADGRAD_GEMM=onednn)";
  case Float32Gemm::automatic:
    return "oneDNN's float32 matmul for products of 2+ rows and 32^3+ multiply-adds, OpenBLAS's sgemm for the others "
           "(HEADGRAD_GEMM=auto)";
  }
  return "?";
}

namespace {
// Below this many multiply-adds the auto rule keeps OpenBLAS (see float32_gemm_on_onednn).
constexpr std::int64_t kOnednnFloat32MinWork = 32 * 32 * 32;
} // namespace

bool float32_gemm_on_onednn(std::int64_t m, std::int64_t n, std::int64_t k) {
  switch (float32_gemm()) {
  case Float32Gemm::openblas: return false;
  case Float32Gemm::onednn: return true;
  case Float32Gemm::automatic: break;
  }
  // The rule (docs/performance.md has the measurements behind it): oneDNN's float32 matmul beat
  // OpenBLAS's sgemm on the linear layers' shapes of the training steps measured, except a single
  // row (OpenBLAS's gemv) and products too small to cover oneDNN's call.
  return m > 1 && m * n * k >= kOnednnFloat32MinWork;
}

} // namespace headgrad::runtime

namespace headgrad::engine {
namespace {

// A grid block holds at least this many rows (or columns) of C, and a gemm is cut only past
// kMinGridWork multiply-adds; at most kMaxGridParts blocks.
constexpr std::int64_t kMinGridBlock = 256;
constexpr std::int64_t kMinGridWork = std::int64_t{1} << 21;
constexpr int kMaxGridParts = 8;

bool spare_threads() { return omp_get_max_threads() > 1 && !omp_in_parallel(); }

// Runs block(p) for p in [0, parts): over the OpenMP threads when there are some to spare, else
// one after the other here. Each block is one oneDNN call on one thread, so the result is the same.
template <typename Block> void run_blocks(int parts, const Block& block) {
  if (parts > 1 && spare_threads()) {
#pragma omp parallel for schedule(static)
    for (int p = 0; p < parts; ++p) block(p);
  } else {
    for (int p = 0; p < parts; ++p) block(p);
  }
}

// C = alpha op(A) op(B) + beta C over the grid, each block by gemm(...) on op(A)'s rows or op(B)'s
// columns of the block (T: float or bf16).
template <typename T, typename Gemm>
void grid_gemm(const Gemm& gemm, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const T* a, std::int64_t lda, const T* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  const int parts = onednn_grid_parts(m, n, k);
  const bool rows = m >= n;
  const std::int64_t len = rows ? m : n;
  run_blocks(parts, [&](int p) {
    const std::int64_t lo = len * p / parts, hi = len * (p + 1) / parts;
    // rows lo..hi of C need rows lo..hi of op(A); columns lo..hi, columns lo..hi of op(B)
    if (rows)
      gemm(ta, tb, hi - lo, n, k, alpha, a + (ta ? lo : lo * lda), lda, b, ldb, beta, c + lo * ldc, ldc);
    else
      gemm(ta, tb, m, hi - lo, k, alpha, a, lda, b + (tb ? lo * ldb : lo), ldb, beta, c + lo, ldc);
  });
}

// Rounds a stored rows x cols operand (leading dimension ld) to bf16, packed (leading dimension
// cols) into `out`; big ones over the threads (rounding is elementwise: the same bits).
void round_operand(std::vector<blas::bf16>& out, const float* x, std::int64_t ld, std::int64_t rows,
                   std::int64_t cols) {
  out.resize(static_cast<std::size_t>(rows * cols));
  count_operand_conversion(rows * cols);
  blas::bf16* o = out.data();
  constexpr std::int64_t kRowsPerTask = 64;
  if (rows * cols >= kernels::kParallelWork && rows >= 2 * kRowsPerTask && spare_threads()) {
    const std::int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for schedule(static)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::int64_t r0 = t * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
      blas::to_bf16(o + r0 * cols, cols, x + r0 * ld, ld, r1 - r0, cols);
    }
  } else {
    blas::to_bf16(o, cols, x, ld, rows, cols);
  }
}

// One operand of a bf16 gemm: the weight copy the guard made, or a rounded copy in `scratch`.
struct Bf16Operand {
  const blas::bf16* data;
  std::int64_t ld;
};
Bf16Operand bf16_operand(std::vector<blas::bf16>& scratch, const float* x, std::int64_t ld, std::int64_t rows,
                         std::int64_t cols) {
  if (const blas::bf16* copy = autocast_weight(x, (rows - 1) * ld + cols)) return {copy, ld};
  round_operand(scratch, x, ld, rows, cols);
  return {scratch.data(), cols};
}

} // namespace

int onednn_grid_parts(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m * n * std::max<std::int64_t>(k, 1) < kMinGridWork) return 1;
  const std::int64_t len = std::max(m, n);
  int parts = 1;
  while (parts * 2 <= kMaxGridParts && len / (parts * 2) >= kMinGridBlock) parts *= 2;
  return parts;
}

void bf16_linear_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) { // (its checks, and beta C for an empty sum)
    blas::onednn_bf16_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // the calling thread's scratch for rounded operands: reused from call to call, never looked up
  thread_local std::vector<blas::bf16> a_scratch, b_scratch;
  const Bf16Operand a16 = bf16_operand(a_scratch, a, lda, ta ? k : m, ta ? m : k);
  const Bf16Operand b16 = bf16_operand(b_scratch, b, ldb, tb ? n : k, tb ? k : n);
  grid_gemm<blas::bf16>(
      [](bool ta_, bool tb_, std::int64_t m_, std::int64_t n_, std::int64_t k_, float al, const blas::bf16* a_,
         std::int64_t lda_, const blas::bf16* b_, std::int64_t ldb_, float be, float* c_, std::int64_t ldc_) {
        blas::onednn_bf16_gemm(ta_, tb_, m_, n_, k_, al, a_, lda_, b_, ldb_, be, c_, ldc_);
      },
      ta, tb, m, n, k, alpha, a16.data, a16.ld, b16.data, b16.ld, beta, c, ldc);
}

void onednn_linear_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                        const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                        std::int64_t ldc) {
  grid_gemm<float>(
      [](bool ta_, bool tb_, std::int64_t m_, std::int64_t n_, std::int64_t k_, float al, const float* a_,
         std::int64_t lda_, const float* b_, std::int64_t ldb_, float be, float* c_, std::int64_t ldc_) {
        blas::onednn_sgemm(ta_, tb_, m_, n_, k_, al, a_, lda_, b_, ldb_, be, c_, ldc_);
      },
      ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void linear_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                 std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (runtime::matmul_precision() == runtime::MatmulPrecision::bf16)
    bf16_linear_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else if (runtime::float32_gemm_on_onednn(m, n, k))
    onednn_linear_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

} // namespace headgrad::engine
