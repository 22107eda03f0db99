// attention_backward.cpp - exercise: write the backward of multi-head attention yourself, one step at
// a time, let autograd check every tensor you compute (Karpathy's "become a backprop ninja",
// makemore part 4, for attention), then train the model with it.
//
//   ./dev.sh exercise attention-backward              builds this file alone and runs the check
//   ./dev.sh exercise attention-backward --train      then trains the sort model with your backward
//   ./dev.sh exercise attention-backward --solution   the same for solutions/attention_backward.cpp
//
// The forward, in attention_forward.hpp, is d2l's MultiHeadAttention with valid_lens
// (https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html) called as
// d2l calls it, attention(X, Z, Z, valid_lens): queries from X, keys and values from one Z, written
// out op by op: struct Forward holds every tensor with its shape, attention_forward() computes them
// one op a line. The check runs it in float64 on tiny shapes, as cross-attention with fewer queries
// than keys (Tq 3, Tk 5), one valid length per query, and dropout on the attention weights with a
// fixed mask M; its loss is L = sum(Y ⊙ R) for a fixed random R, so dL/dY = R. In short:
//   Q = X W_qᵀ (B, Tq, h); K, V = Z W_kᵀ, Z W_vᵀ (B, Tk, h)   Qh, Kh, Vh = transpose_qkv(Q, K, V)  (B*H, T, d)
//   S = s Qh Khᵀ, P = masked_softmax(S)  (B*H, Tq, Tk)       A = P ⊙ M / (1 - p), O = A Vh       (B*H, Tq, d)
//   C = transpose_output(O), Y = C W_oᵀ   (B, Tq, h)
//
// Your part: the nine step functions under "your backward". Each TODO(name) is one tensor to
// compute. A step receives the forward's tensors (they carry no gradient: compute, do not look up)
// and autograd's gradient of what the step's forward produced, so each step is checked on its own,
// in any order. Run the program after each step: one line per tensor, max |yours - autograd's| and
// PASS (within 1e-10) or FAIL; the exit code is 0 only when every tensor passes. When all pass,
// --train runs the sort model's training (train/loop/train_step.cpp) with your nine steps as the
// backward of every attention layer: the first steps' losses beside autograd's, then training to
// >= 0.99 held-out sequence accuracy.
//
// docs/backprop-through-attention.md derives every step; its glossary is the notation here:
// dZ = dL/dZ has Z's shape, P are the attention weights, s = 1/sqrt(d) the scale.
//
// What you can use (headgrad's ops, as torch in the notebook; nothing records a graph here):
//   ops::matmul(a, b)            batched over the leading axis; (B, T, h) @ (h, F) broadcasts the
//   ops::matmul(a, b, s)         right side; s scales the product (the gemm's alpha)
//   a.transpose(i, j), a.reshape({...}), a.permute({...})
//   a + b, a - b, a * b, a / 2.0, a * 2.0 elementwise, broadcasting as NumPy
//   ops::sum(a, {axes}, keepdim) sum over axes
//   models::transpose_qkv(a, H), models::transpose_output(a, H)   (B, T, h) <-> (B*H, T, d)
#include "docs/exercises/attention_forward.hpp"
#include "docs/exercises/attention_train.hpp"

// ---- your backward: one function per step, from dY back to X and Z -------------------------------

// 1. W_o. Forward: Y = C W_oᵀ (a linear layer without bias over the B*Tq rows of C).
//    Given dY (B, Tq, h), compute dC (B, Tq, h) and dW_o (h, h), summed over every row.
void step_W_o(const Forward& f, const Tensor& dY, Tensor& dC, Tensor& dW_o) {
  // TODO(dC)
  // TODO(dW_o)
}

// 2. transpose_output. Forward: C = transpose_output(O, H), a permutation of O's entries.
//    Given dC (B, Tq, h), compute dO (B*H, Tq, d).
void step_transpose_output(const Forward& f, const Tensor& dC, Tensor& dO) {
  // TODO(dO)
}

// 3. The weighted sum. Forward: O = A Vh per head (A: the weights after dropout).
//    Given dO (B*H, Tq, d), compute dA (B*H, Tq, Tk) and dVh (B*H, Tk, d).
void step_AV(const Forward& f, const Tensor& dO, Tensor& dA, Tensor& dVh) {
  // TODO(dA)
  // TODO(dVh)
}

// 4. Dropout on the weights. Forward: A = P ⊙ M / (1 - p), with the fixed 0/1 mask f.M.
//    Given dA (B*H, Tq, Tk), compute dP (B*H, Tq, Tk).
void step_dropout(const Forward& f, const Tensor& dA, Tensor& dP) {
  // TODO(dP)
}

// 5. The masked softmax. Forward: P = masked_softmax(S, lens), row by row; masked keys get P = 0.
//    Given dO (B*H, Tq, d) and dP (B*H, Tq, Tk), compute the row term D (B*H, Tq, 1) the way the
//    fused kernel does, from dO and O (not from dP and P), and with it dS (B*H, Tq, Tk), without
//    building the softmax's Jacobian.
void step_softmax(const Forward& f, const Tensor& dO, const Tensor& dP, Tensor& D, Tensor& dS) {
  // TODO(D)
  // TODO(dS)
}

// 6. The scaled scores. Forward: S = s Qh Khᵀ per head.
//    Given dS (B*H, Tq, Tk), compute dQh (B*H, Tq, d) and dKh (B*H, Tk, d).
void step_scores(const Forward& f, const Tensor& dS, Tensor& dQh, Tensor& dKh) {
  // TODO(dQh)
  // TODO(dKh)
}

// 7. transpose_qkv. Forward: Qh = transpose_qkv(Q, H), and the same for K and V.
//    Given dQh (B*H, Tq, d), dKh and dVh (B*H, Tk, d), compute dQ (B, Tq, h), dK and dV (B, Tk, h).
void step_transpose_qkv(const Forward& f, const Tensor& dQh, const Tensor& dKh, const Tensor& dVh, Tensor& dQ,
                        Tensor& dK, Tensor& dV) {
  // TODO(dQ)
  // TODO(dK)
  // TODO(dV)
}

// 8. W_q, W_k, W_v. Forward: Q = X W_qᵀ, K = Z W_kᵀ, V = Z W_vᵀ.
//    Given dQ (B, Tq, h), dK and dV (B, Tk, h), compute dW_q (h, Fq), dW_k and dW_v (h, Fk).
void step_projection_weights(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dW_q,
                             Tensor& dW_k, Tensor& dW_v) {
  // TODO(dW_q)
  // TODO(dW_k)
  // TODO(dW_v)
}

// 9. The inputs. X was read by W_q; Z twice, by W_k and W_v: its gradient is the sum of two paths.
//    (In self-attention X and Z are one tensor, and autograd adds dX and dZ up.)
//    Given dQ (B, Tq, h), dK and dV (B, Tk, h), compute dX (B, Tq, Fq) and dZ (B, Tk, Fk).
void step_inputs(const Forward& f, const Tensor& dQ, const Tensor& dK, const Tensor& dV, Tensor& dX, Tensor& dZ) {
  // TODO(dX)
  // TODO(dZ)
}

// ---- the check of every tensor, and with --train the training run (attention_train.hpp) ----------
int main(int argc, char** argv) { return attention_exercise_main(argc, argv); }
