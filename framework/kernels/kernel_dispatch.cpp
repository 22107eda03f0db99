// kernel_dispatch.cpp - the float and double instances of the row and attention kernels, as the
// ops call them: each forwards to the copy built for runtime::active_isa() (isa/kernel_table.hpp;
// the headers declare these specializations outside the per-instruction-set copies).
#include "framework/kernels/isa/kernel_table.hpp"

namespace headgrad::kernels {

template <>
void softmax_forward<float>(float* y, const float* x, const std::int64_t* lens, const std::uint8_t* keep,
                            std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<float>().softmax_forward(y, x, lens, keep, rows, cols);
}
template <>
void softmax_backward<float>(float* dx, bool first_write, const float* dy, const float* y, const std::int64_t* lens,
                             const std::uint8_t* keep, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<float>().softmax_backward(dx, first_write, dy, y, lens, keep, rows, cols);
}
template <> void log_softmax_forward<float>(float* y, const float* x, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<float>().log_softmax_forward(y, x, rows, cols);
}
template <>
void log_softmax_backward<float>(float* dx, bool first_write, const float* dy, const float* y, std::int64_t rows,
                                 std::int64_t cols) {
  kernel_table().rows<float>().log_softmax_backward(dx, first_write, dy, y, rows, cols);
}
template <>
void layer_norm_forward<float>(float* y, float* stats, const float* x, const float* w, const float* b,
                               std::int64_t rows, std::int64_t D, float eps) {
  kernel_table().rows<float>().layer_norm_forward(y, stats, x, w, b, rows, D, eps);
}
template <>
void add_layer_norm_forward<float>(float* y, float* s, float* stats, const float* a, const float* b, const float* w,
                                   const float* bias, std::int64_t rows, std::int64_t D, float eps) {
  kernel_table().rows<float>().add_layer_norm_forward(y, s, stats, a, b, w, bias, rows, D, eps);
}
template <>
void layer_norm_backward<float>(float* dx, bool dx_first, float* dw, bool dw_first, float* db, bool db_first,
                                const float* dy, const float* x, const float* w, const float* stats, std::int64_t rows,
                                std::int64_t D) {
  kernel_table().rows<float>().layer_norm_backward(dx, dx_first, dw, dw_first, db, db_first, dy, x, w, stats, rows, D);
}
template <>
double cross_entropy_forward<float>(float* probs, float* row_loss, const float* x, const std::int64_t* target,
                                    const double* weight, std::int64_t rows, std::int64_t V) {
  return kernel_table().rows<float>().cross_entropy_forward(probs, row_loss, x, target, weight, rows, V);
}
template <>
void cross_entropy_backward<float>(float* dx, bool first_write, const float* probs, const std::int64_t* target,
                                   const float* row_scale, std::int64_t rows, std::int64_t V) {
  kernel_table().rows<float>().cross_entropy_backward(dx, first_write, probs, target, row_scale, rows, V);
}
template <> void fill_rows<float>(float* y, const float* b, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<float>().fill_rows(y, b, rows, cols);
}
template <>
void column_sums<float>(float* out, bool first_write, const float* x, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<float>().column_sums(out, first_write, x, rows, cols);
}
template <>
void attention_forward<float>(float* o, float* p, const float* q, const float* k, const float* v, const HeadsLayout& L,
                              const KeptKeys& kept, float scale) {
  kernel_table().rows<float>().attention_forward(o, p, q, k, v, L, kept, scale);
}
template <>
void attention_backward<float>(float* dq, bool dq_first, float* dk, bool dk_first, float* dv, bool dv_first,
                               const float* dout, const float* p, const float* q, const float* k, const float* v,
                               const HeadsLayout& L, float scale, const KeptKeys& kept) {
  kernel_table().rows<float>().attention_backward(dq, dq_first, dk, dk_first, dv, dv_first, dout, p, q, k, v, L, scale,
                                                kept);
}
template <>
void flash_attention_forward<float>(float* o, float* lse, const float* q, const float* k, const float* v,
                                    const HeadsLayout& L, const KeptKeys& kept, float scale) {
  kernel_table().rows<float>().flash_attention_forward(o, lse, q, k, v, L, kept, scale);
}
template <>
void flash_attention_backward<float>(float* dq, bool dq_first, float* dk, bool dk_first, float* dv, bool dv_first,
                                     const float* dout, const float* o, const float* lse, const float* q,
                                     const float* k, const float* v, const HeadsLayout& L, const KeptKeys& kept,
                                     float scale) {
  kernel_table().rows<float>().flash_attention_backward(dq, dq_first, dk, dk_first, dv, dv_first, dout, o, lse, q, k, v,
                                                        L, kept, scale);
}
template <>
void softmax_forward<double>(double* y, const double* x, const std::int64_t* lens, const std::uint8_t* keep,
                             std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<double>().softmax_forward(y, x, lens, keep, rows, cols);
}
template <>
void softmax_backward<double>(double* dx, bool first_write, const double* dy, const double* y, const std::int64_t* lens,
                             const std::uint8_t* keep, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<double>().softmax_backward(dx, first_write, dy, y, lens, keep, rows, cols);
}
template <> void log_softmax_forward<double>(double* y, const double* x, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<double>().log_softmax_forward(y, x, rows, cols);
}
template <>
void log_softmax_backward<double>(double* dx, bool first_write, const double* dy, const double* y, std::int64_t rows,
                                  std::int64_t cols) {
  kernel_table().rows<double>().log_softmax_backward(dx, first_write, dy, y, rows, cols);
}
template <>
void layer_norm_forward<double>(double* y, double* stats, const double* x, const double* w, const double* b,
                                std::int64_t rows, std::int64_t D, double eps) {
  kernel_table().rows<double>().layer_norm_forward(y, stats, x, w, b, rows, D, eps);
}
template <>
void add_layer_norm_forward<double>(double* y, double* s, double* stats, const double* a, const double* b,
                                    const double* w, const double* bias, std::int64_t rows, std::int64_t D,
                                    double eps) {
  kernel_table().rows<double>().add_layer_norm_forward(y, s, stats, a, b, w, bias, rows, D, eps);
}
template <>
void layer_norm_backward<double>(double* dx, bool dx_first, double* dw, bool dw_first, double* db, bool db_first,
                                 const double* dy, const double* x, const double* w, const double* stats,
                                 std::int64_t rows, std::int64_t D) {
  kernel_table().rows<double>().layer_norm_backward(dx, dx_first, dw, dw_first, db, db_first, dy, x, w, stats, rows, D);
}
template <>
double cross_entropy_forward<double>(double* probs, double* row_loss, const double* x, const std::int64_t* target,
                                     const double* weight, std::int64_t rows, std::int64_t V) {
  return kernel_table().rows<double>().cross_entropy_forward(probs, row_loss, x, target, weight, rows, V);
}
template <>
void cross_entropy_backward<double>(double* dx, bool first_write, const double* probs, const std::int64_t* target,
                                    const double* row_scale, std::int64_t rows, std::int64_t V) {
  kernel_table().rows<double>().cross_entropy_backward(dx, first_write, probs, target, row_scale, rows, V);
}
template <> void fill_rows<double>(double* y, const double* b, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<double>().fill_rows(y, b, rows, cols);
}
template <>
void column_sums<double>(double* out, bool first_write, const double* x, std::int64_t rows, std::int64_t cols) {
  kernel_table().rows<double>().column_sums(out, first_write, x, rows, cols);
}
template <>
void attention_forward<double>(double* o, double* p, const double* q, const double* k, const double* v,
                               const HeadsLayout& L, const KeptKeys& kept, double scale) {
  kernel_table().rows<double>().attention_forward(o, p, q, k, v, L, kept, scale);
}
template <>
void attention_backward<double>(double* dq, bool dq_first, double* dk, bool dk_first, double* dv, bool dv_first,
                               const double* dout, const double* p, const double* q, const double* k, const double* v,
                               const HeadsLayout& L, double scale, const KeptKeys& kept) {
  kernel_table().rows<double>().attention_backward(dq, dq_first, dk, dk_first, dv, dv_first, dout, p, q, k, v, L, scale,
                                                kept);
}
template <>
void flash_attention_forward<double>(double* o, double* lse, const double* q, const double* k, const double* v,
                                     const HeadsLayout& L, const KeptKeys& kept, double scale) {
  kernel_table().rows<double>().flash_attention_forward(o, lse, q, k, v, L, kept, scale);
}
template <>
void flash_attention_backward<double>(double* dq, bool dq_first, double* dk, bool dk_first, double* dv, bool dv_first,
                                      const double* dout, const double* o, const double* lse, const double* q,
                                      const double* k, const double* v, const HeadsLayout& L, const KeptKeys& kept,
                                      double scale) {
  kernel_table().rows<double>().flash_attention_backward(dq, dq_first, dk, dk_first, dv, dv_first, dout, o, lse, q, k,
                                                         v, L, kept, scale);
}

} // namespace headgrad::kernels
