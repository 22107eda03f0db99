// layernorm_cross_entropy.cpp - exercise: the fused backward of cross-entropy and of layer norm,
// each in one formula, checked against autograd (makemore part 4's exercises 2 and 3, "become a
// backprop ninja", with layer norm where the notebook has batch norm).
//
//   ./dev.sh exercise layernorm-cross-entropy              builds this file alone and runs it
//   ./dev.sh exercise layernorm-cross-entropy --solution   the same for solutions/layernorm_cross_entropy.cpp
//
// The forward: a layer norm over the features of x, a linear layer to V classes, and the masked
// mean cross-entropy over the positions t < valid_lens[b] - the last steps of headgrad's sequence
// model (models/transformer.cpp). layernorm_cross_entropy_forward.hpp writes it out in small ops,
// the way autograd sees it (struct Forward holds every tensor with its shape), and the check first
// confirms it equals the fused ops::layer_norm and ops::cross_entropy, whose backward you write
// here in one formula each instead of one step per small op. In short, per position (b, t):
//   mu, var = mean and biased variance of x over D; rstd = 1/sqrt(var + eps); xhat = (x - mu) rstd
//   y = xhat ⊙ gamma + beta; logits = y Wᵀ + b; L = -sum(mask ⊙ log softmax(logits)[target]) / N
//
// Your part: the three step functions under "your backward"; each TODO(name) is one tensor. Each
// step receives the forward's tensors (they carry no gradient: compute, do not look up) and
// autograd's gradient of what its forward produced, so each is checked on its own. Run the program
// after each step: one line per tensor, max |yours - autograd's| and PASS (within 1e-10) or FAIL;
// the exit code is 0 only when every tensor passes.
// docs/backprop-through-attention.md (step 1) and framework/ops/DERIVATIVES.md (layer_norm) have
// the formulas, once you have tried.
//
// What you can use (headgrad's ops; nothing records a graph here):
//   ops::matmul(a, b), a.transpose(i, j), a.reshape({...}), a + b, a - b, a * b, a / b, a * 2.0
//   ops::sum(a, {axes}, keepdim), ops::mean(a, {axes}, keepdim), ops::softmax(a) (last axis)
//   ops::unsqueeze(a, axis)      (B, T) -> (B, T, 1), to broadcast a per-position value
#include "docs/exercises/layernorm_cross_entropy_forward.hpp"

// ---- your backward: three steps, from the loss back to x -------------------------------------------

// 1. Cross-entropy, fused. Forward: lse, logp, picked and L in forward(), from the logits.
//    Given dL (a scalar: dL/dL is 1 only when L itself is what backward starts from; the check
//    starts from L / 3, as one of three accumulated micro-batches, so dL = 1/3), compute dlogits
//    (B, T, V) in one expression, not through lse, logp and picked. A position the mask leaves out
//    gets 0.
void step_cross_entropy(const Forward& f, const Tensor& dL, Tensor& dlogits) {
  // TODO(dlogits)
}

// 2. The output layer. Forward: logits = y Wᵀ + b over the B*T rows of y.
//    Given dlogits (B, T, V), compute dy (B, T, D), dW (V, D) and db (V).
void step_linear(const Forward& f, const Tensor& dlogits, Tensor& dy, Tensor& dW, Tensor& db) {
  // TODO(dy)
  // TODO(dW)
  // TODO(db)
}

// 3. Layer norm, fused. Forward: mu, xc, var, rstd, xhat and y in forward(), from x, gamma and beta.
//    Given dy (B, T, D), compute dgamma (D), dbeta (D) and dx (B, T, D) in one formula, not
//    through xhat, rstd, var, xc and mu (you may use f.xhat and f.rstd).
void step_layer_norm(const Forward& f, const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  // TODO(dgamma)
  // TODO(dbeta)
  // TODO(dx)
}

// ---- the check: every tensor you computed against autograd's (layernorm_cross_entropy_forward.hpp) ----
int main(int argc, char** argv) { return layernorm_exercise_main(argc, argv); }
