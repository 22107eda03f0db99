// layer_norm.hpp - `headgrad explain --layer-norm`: layer norm of two rows of four features, step
// by step as docs/backprop-through-attention.md derives it ("Layer norm, step by step"): the
// forward through mu, xc, var, rstd and xhat, then the backward in the closed form the fused op
// computes, dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy gamma, checked against autograd
// through the small ops, against ops::layer_norm's own backward and by the float64 gradient check.
// Row 0 is small enough to do by hand (exercise 13 of docs/exercises.md).
#pragma once
#include "train/explain/explain.hpp"

namespace headgrad::cli::explain {

// What explain prints for --layer-norm (options: precision and summary; the example is fixed).
ExplainResult run_layer_norm(const ExplainOptions& options);

} // namespace headgrad::cli::explain
