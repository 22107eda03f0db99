// fused_view.hpp - `headgrad explain --fused`: the backward the fused attention kernel computes
// (framework/engine/kernels/isa/attention_heads.cpp, head_backward and head_flash_backward), per head, from
// the composed stages' tensors: dP = dO Vhᵀ, D = rowsum(dO ⊙ O) beside rowsum(dP ⊙ P) (equal,
// because O = P Vh: the identity FlashAttention-2's backward uses so that it needs O, not P),
// and dS = P ⊙ (dP - D); then ops::attention itself, whose dQ, dK and dV equal the stages'.
#pragma once
#include "train/explain/example.hpp"
#include "train/explain/stages.hpp"
#include "train/explain/tensor_printer.hpp"

namespace headgrad::cli::explain {

// After backward_stages. Returns the largest difference it printed (each should be round-off).
double print_fused_backward(const Example& e, const Stages& s, TensorPrinter& p);

} // namespace headgrad::cli::explain
