// attention_rows.hpp - one (batch, head) pair of attention for short sequences, row by row at the
// vector width of the copy it is built in, instead of six BLAS calls per pair.
//
// What makes it faster than the gemms of attention_heads.cpp's head_forward / head_backward, on
// the same formulas:
//   - each query row's scores, and every product after them, run only over the keys the row keeps
//     (its kept prefix: a causal decoder's row i sees keys 0..i, about half the products of full
//     T x T gemms);
//   - no BLAS call: at T = 64, d_head = 32 a product is 0.26 MFLOP, and OpenBLAS spent as long
//     setting up and packing each one (and, for C = A Bᵀ, on its packed path) as multiplying;
//   - the softmax runs on each row of scores while it is in cache.
// Results agree with the gemm path within rounding: sums in another order, with FMA where the CPU
// has it - but not for the pairs small enough for small_gemm.hpp's loop gemms, whose products
// round as those do (the golden tests of small models against PyTorch keep their margins). The
// callers fall back to the gemm path where these kernels could differ in more than rounding: a NaN
// or infinity in an input that the gemms would multiply by a masked weight of 0 (0 x inf is NaN
// there, skipped here), keep flags, dropout.
#pragma once
#include <cstdint>

#include "framework/engine/kernels/isa_namespace.hpp"

namespace headgrad::engine {

// One pair's matrices: Q (Tq x dh), K and V (Tk x dh), each with its row stride; query row i keeps
// keys j < lens[i] (lens null: every key).
template <typename T> struct RowsHead {
  std::int64_t Tq = 0, Tk = 0, dh = 0;
  const T *Q = nullptr, *K = nullptr, *V = nullptr;
  std::int64_t ldq = 0, ldk = 0, ldv = 0;
  const std::int64_t* lens = nullptr;
};

HEADGRAD_ISA_BEGIN

// Whether the row kernels take a pair of this size: d_head a whole number of vectors of this copy,
// at most kRowsMaxKeys keys (longer sequences: the gemm path, or the flash kernels). A pair small
// enough for small_gemm's loop gemms rounds as they do: no FMA.
inline constexpr std::int64_t kRowsMaxKeys = 256;
template <typename T> bool attention_rows_fit(std::int64_t Tk, std::int64_t dh);

// Forward: P (Tq x Tk, contiguous) = softmax(scale Q Kᵀ) over each row's kept keys (0 elsewhere;
// a row whose kept scores hold a NaN or +inf is NaN on every key), O (Tq x dh, row stride ldo) =
// P V. Returns false, writing nothing, when V holds a NaN or an infinity.
template <typename T> bool attention_rows_forward(T* O, std::int64_t ldo, T* P, const RowsHead<T>& h, T scale);

// Backward, given dO (row stride ldo) and the forward's P: dV = Pᵀ dO, dS = softmax's VJP of
// dP = dO Vᵀ, dQ = scale dS K, dK = scale dSᵀ Q, each into its matrix (with its head's row stride,
// null: not wanted), assigned on a first write, added otherwise. Returns false, writing nothing,
// when Q, K, V or dO holds a NaN or an infinity.
template <typename T>
bool attention_rows_backward(T* dQ, bool q_first, T* dK, bool k_first, T* dV, bool v_first, const T* dO,
                             std::int64_t ldo, const T* P, const RowsHead<T>& h, T scale);

HEADGRAD_ISA_END

} // namespace headgrad::engine
