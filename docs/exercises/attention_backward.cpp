// attention_backward.cpp - exercise: write the backward of multi-head self-attention yourself, one
// step at a time, and let autograd check every tensor you compute (Karpathy's "become a backprop
// ninja", makemore part 4, for attention).
//
//   ./dev.sh exercise attention-backward              builds this file alone and runs it
//   ./dev.sh exercise attention-backward --solution   the same for solutions/attention_backward.cpp
//
// The forward, in attention_forward.hpp, is d2l's MultiHeadAttention with valid_lens
// (https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html), used as
// self-attention (one X for queries, keys and values), written out op by op in float64 on tiny
// shapes: struct Forward holds every tensor with its shape, forward() computes them one op a line,
// and the check first confirms it equals models::MultiHeadAttention. The loss is L = sum(Y ⊙ R)
// for a fixed random R, so dL/dY = R. In short:
//   Q, K, V = X W_qᵀ, X W_kᵀ, X W_vᵀ       (B, T, h)      Qh, Kh, Vh = transpose_qkv(Q, K, V)  (B*H, T, d)
//   S = s Qh Khᵀ, P = masked_softmax(S)  (B*H, T, T)    O = P Vh                             (B*H, T, d)
//   C = transpose_output(O), Y = C W_oᵀ   (B, T, h)      L = sum(Y ⊙ R)
//
// Your part: the eight step functions under "your backward". Each TODO(name) is one tensor to
// compute. A step receives the forward's tensors and autograd's gradient of what the step's
// forward produced, so each step is checked on its own, in any order. Run the program after each
// step: one line per tensor, max |yours - autograd's| and PASS (within 1e-10) or FAIL; the exit
// code is 0 only when every tensor passes.
//
// docs/backprop-through-attention.md derives every step; its glossary is the notation here:
// dZ = dL/dZ has Z's shape, P are the attention weights, s = 1/sqrt(d) the scale.
//
// What you can use (headgrad's ops, as torch in the notebook; nothing records a graph here):
//   ops::matmul(a, b)            batched over the leading axis; (B, T, h) @ (h, F) broadcasts the
//   ops::matmul(a, b, s)         right side; s scales the product (the gemm's alpha)
//   a.transpose(i, j), a.reshape({...}), a.permute({...})
//   a + b, a - b, a * b, a * 2.0 elementwise, broadcasting as NumPy
//   ops::sum(a, {axes}, keepdim) sum over axes
//   models::transpose_qkv(a, H), models::transpose_output(a, H)   (B, T, h) <-> (B*H, T, d)
#include "docs/exercises/attention_forward.hpp"

// ---- your backward: one function per step, from the loss back to X -----------------------------

// 1. W_o. Forward: Y = C W_oᵀ (a linear layer without bias over the B*T rows of C).
//    Given dY (B, T, h), compute dC (B, T, h) and dW_o (h, h), summed over every row.
void step_W_o(const Forward& f, const Tensor& dY, Tensor& dC, Tensor& dW_o) {
  // TODO(dC)
  // TODO(dW_o)
}

// 2. transpose_output. Forward: C = transpose_output(O, H), a permutation of O's entries.
//    Given dC (B, T, h), compute dO (B*H, T, d).
void step_transpose_output(const Forward& f, const Tensor& dC, Tensor& dO) {
  // TODO(dO)
}

// 3. The weighted sum. Forward: O = P Vh per head.
//    Given dO (B*H, T, d), compute dP (B*H, T, T) and dVh (B*H, T, d).
void step_PV(const Forward& f, const Tensor& dO, Tensor& dP, Tensor& dVh) {
  // TODO(dP)
  // TODO(dVh)
}

// 4. The masked softmax. Forward: P = masked_softmax(S, lens), row by row; masked keys get P = 0.
//    Given dP (B*H, T, T), compute dS (B*H, T, T) without building the softmax's Jacobian.
void step_softmax(const Forward& f, const Tensor& dP, Tensor& dS) {
  // TODO(dS)
}

// 5. The scaled scores. Forward: S = s Qh Khᵀ per head.
//    Given dS (B*H, T, T), compute dQh (B*H, T, d) and dKh (B*H, T, d).
void step_scores(const Forward& f, const Tensor& dS, Tensor& dQh, Tensor& dKh) {
  // TODO(dQh)
  // TODO(dKh)
}

// 6. transpose_qkv. Forward: Qh = transpose_qkv(Q, H), and the same for K and V.
//    Given dQh, dKh, dVh (B*H, T, d), compute dQ, dK, dV (B, T, h).
void step_transpose_qkv(const Forward& f, const Tensor& dQh, const Tensor& dKh, const Tensor& dVh, Tensor& dQ,
                        Tensor& dK, Tensor& dV) {
  // TODO(dQ)
  // TODO(dK)
  // TODO(dV)
}

// 7. W_q, W_k, W_v. Forward: Q = X W_qᵀ, K = X W_kᵀ, V = X W_vᵀ.
//    Given dQ, dK, dV (B, T, h), compute dW_q, dW_k, dW_v (h, F).
void step_projection_weights(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dW_q,
                             Tensor& dW_k, Tensor& dW_v) {
  // TODO(dW_q)
  // TODO(dW_k)
  // TODO(dW_v)
}

// 8. X. It was read three times, by the three projections: its gradient is the sum of three paths.
//    Given dQ, dK, dV (B, T, h), compute dX (B, T, F).
void step_X(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dX) {
  // TODO(dX)
}

// ---- the check: every tensor you computed against autograd's (attention_forward.hpp) -------------
int main() { return check_your_backward(); }
