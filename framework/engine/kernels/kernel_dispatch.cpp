// kernel_dispatch.cpp - the float and double instances of the row and attention kernels, the Adam
// update and the tiny gemms, as the ops and the optimizer call them: each forwards to the copy built for runtime::active_isa()
// (isa/kernel_table.hpp; the headers declare these outside the per-instruction-set copies).
#include "framework/engine/kernels/kernel_table.hpp"

namespace headgrad::kernels {

// One definition per kernel, for T = float and T = double: the call goes to the active copy's entry.
#define HEADGRAD_DISPATCH_TO_TABLE(T) \
  template <> void softmax_forward<T>(T* y, const T* x, const std::int64_t* lens, const std::uint8_t* keep, \
      std::int64_t rows, std::int64_t cols) { \
    kernel_table().rows<T>().softmax_forward(y, x, lens, keep, rows, cols); \
  } \
  template <> void softmax_backward<T>(T* dx, bool first_write, const T* dy, const T* y, \
      const std::int64_t* lens, const std::uint8_t* keep, std::int64_t rows, std::int64_t cols) { \
    kernel_table().rows<T>().softmax_backward(dx, first_write, dy, y, lens, keep, rows, cols); \
  } \
  template <> void log_softmax_forward<T>(T* y, const T* x, std::int64_t rows, std::int64_t cols) { \
    kernel_table().rows<T>().log_softmax_forward(y, x, rows, cols); \
  } \
  template <> void log_softmax_backward<T>(T* dx, bool first_write, const T* dy, const T* y, std::int64_t rows, \
      std::int64_t cols) { \
    kernel_table().rows<T>().log_softmax_backward(dx, first_write, dy, y, rows, cols); \
  } \
  template <> void layer_norm_forward<T>(T* y, T* stats, const T* x, const T* w, const T* b, std::int64_t rows, \
      std::int64_t D, T eps) { \
    kernel_table().rows<T>().layer_norm_forward(y, stats, x, w, b, rows, D, eps); \
  } \
  template <> void add_layer_norm_forward<T>(T* y, T* s, T* stats, const T* a, const T* b, const T* w, \
      const T* bias, std::int64_t rows, std::int64_t D, T eps) { \
    kernel_table().rows<T>().add_layer_norm_forward(y, s, stats, a, b, w, bias, rows, D, eps); \
  } \
  template <> void layer_norm_backward<T>(T* dx, bool dx_first, T* dw, bool dw_first, T* db, bool db_first, \
      const T* dy, const T* x, const T* w, const T* stats, std::int64_t rows, std::int64_t D) { \
    kernel_table().rows<T>().layer_norm_backward(dx, dx_first, dw, dw_first, db, db_first, dy, x, w, stats, rows, D); \
  } \
  template <> double cross_entropy_forward<T>(T* probs, T* row_loss, const T* x, const std::int64_t* target, \
      const double* weight, std::int64_t rows, std::int64_t V) { \
    return kernel_table().rows<T>().cross_entropy_forward(probs, row_loss, x, target, weight, rows, V); \
  } \
  template <> void cross_entropy_backward<T>(T* dx, bool first_write, const T* probs, const std::int64_t* target, \
      const T* row_scale, std::int64_t rows, std::int64_t V) { \
    kernel_table().rows<T>().cross_entropy_backward(dx, first_write, probs, target, row_scale, rows, V); \
  } \
  template <> void fill_rows<T>(T* y, const T* b, std::int64_t rows, std::int64_t cols) { \
    kernel_table().rows<T>().fill_rows(y, b, rows, cols); \
  } \
  template <> void add_rows<T>(T* y, const T* res, const T* b, std::int64_t rows, std::int64_t cols) { \
    kernel_table().rows<T>().add_rows(y, res, b, rows, cols); \
  } \
  template <> void column_sums<T>(T* out, bool first_write, const T* x, std::int64_t rows, std::int64_t cols) { \
    kernel_table().rows<T>().column_sums(out, first_write, x, rows, cols); \
  } \
  template <> void attention_forward<T>(T* o, T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, \
      const KeptKeys& kept, T scale, const WeightsDropout& drop) { \
    kernel_table().rows<T>().attention_forward(o, p, q, k, v, L, kept, scale, drop); \
  } \
  template <> void attention_backward<T>(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, \
      const T* dout, const T* p, const T* q, const T* k, const T* v, const HeadsLayout& L, T scale, \
      const KeptKeys& kept, const WeightsDropout& drop) { \
    kernel_table().rows<T>().attention_backward(dq, dq_first, dk, dk_first, dv, dv_first, dout, p, q, k, v, L, \
                                                scale, kept, drop); \
  } \
  template <> void flash_attention_forward<T>(T* o, T* lse, const T* q, const T* k, const T* v, \
      const HeadsLayout& L, const KeptKeys& kept, T scale) { \
    kernel_table().rows<T>().flash_attention_forward(o, lse, q, k, v, L, kept, scale); \
  } \
  template <> void flash_attention_backward<T>(T* dq, bool dq_first, T* dk, bool dk_first, T* dv, bool dv_first, \
      const T* dout, const T* o, const T* lse, const T* q, const T* k, const T* v, const HeadsLayout& L, \
      const KeptKeys& kept, T scale) { \
    kernel_table().rows<T>().flash_attention_backward(dq, dq_first, dk, dk_first, dv, dv_first, dout, o, lse, q, k, \
                                                      v, L, kept, scale); \
  } \
  template <> bool attention_rows_fit<T>(std::int64_t Tk, std::int64_t dh) { \
    return kernel_table().rows<T>().attention_rows_fit(Tk, dh); \
  } \
  template <> void adam_update<T>(T* w, const T* gr, T* m, T* v, T* vmax, std::int64_t n, const AdamScalars<T>& c) { \
    kernel_table().rows<T>().adam_update(w, gr, m, v, vmax, n, c); \
  }
HEADGRAD_DISPATCH_TO_TABLE(float)
HEADGRAD_DISPATCH_TO_TABLE(double)
#undef HEADGRAD_DISPATCH_TO_TABLE

// small_gemm.hpp's two overloads (gemm_batched.hpp's tiny products), likewise.
void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  kernel_table().rows<float>().small_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void small_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  kernel_table().rows<double>().small_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

} // namespace headgrad::kernels
