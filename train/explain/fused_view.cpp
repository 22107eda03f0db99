#include "train/explain/fused_view.hpp"

#include <cmath>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::cli::explain {
namespace {

// Row r of the B*H heads of a (B*H, T, c) tensor, as (T, c).
Tensor head(const Tensor& t, std::int64_t r) { return t.slice(0, r, r + 1).reshape({t.shape()[1], t.shape()[2]}); }

} // namespace

double print_fused_backward(const Example& e, const Stages& s, TensorPrinter& p) {
  p.heading("the fused kernel's backward, per head (kernels/isa/attention_heads.cpp: head_backward)");
  p.line("O, P and Vh from the forward, dO from the backward above; the kernel never builds Qh, Kh, Vh or C:");
  p.line("it reads each head's d columns of Q, K, V in place. D = rowsum(dO * O) equals rowsum(dP * P),");
  p.line("because O = P Vh: rowsum(dO * O) = sum_j P_ij (dO Vh^T)_ij. The flash backward keeps O, not P.");
  double worst = 0;
  const Tensor dO_all = s.heads_in.grad(), dS_all = s.scores_in.grad();
  for (std::int64_t r = 0; r < e.B * e.H; ++r) {
    NoGradGuard no_grad;
    const Tensor dO = head(dO_all, r), O = head(s.heads_out, r), P = head(s.weights, r), Vh = head(s.Vh, r);
    p.line(fmt::format("-- batch row {}, head {} (row {} of B*H)", r / e.H, r % e.H, r));
    const Tensor dP = ops::matmul(dO, Vh.transpose(0, 1));
    p.tensor("dP = dO Vh^T", dP, "(Tq, Tk)");
    const Tensor D = ops::sum(dO * O, {1});
    const Tensor D_P = ops::sum(dP * P, {1});
    p.tensor("D = rowsum(dO * O)", D, "(Tq)");
    p.tensor("rowsum(dP * P)", D_P, "(Tq): the same numbers");
    const Tensor dS = P * (dP - ops::unsqueeze(D, 1));
    p.tensor("dS = P * (dP - D)", dS, "(Tq, Tk)");
    const double d_diff = max_abs_diff(D, D_P), s_diff = max_abs_diff(dS, head(dS_all, r));
    p.line(fmt::format("D vs rowsum(dP * P): max abs diff {:.1e}; dS vs the stages' dS: max abs diff {:.1e}", d_diff,
                       s_diff));
    worst = std::max({worst, d_diff, s_diff});
  }
  // ops::attention: the same Q, K, V (fresh leaves), backward from the stages' dC
  Tensor Q = s.Q.detach().contiguous().set_requires_grad(), K = s.K.detach().contiguous().set_requires_grad(),
         V = s.V.detach().contiguous().set_requires_grad();
  ops::AttentionMask mask;
  mask.valid_lens = e.valid_lens;
  const Tensor C = ops::attention(Q, K, V, e.H, mask);
  C.backward(s.concat_in.grad());
  const double c = max_abs_diff(C, s.concat), q = max_abs_diff(Q.grad(), s.Q_in.grad()),
               k = max_abs_diff(K.grad(), s.K_in.grad()), v = max_abs_diff(V.grad(), s.V_in.grad());
  p.line(fmt::format("ops::attention (one op, one kernel pair) on the same Q, K, V, backward from dC: C, dQ, dK, dV vs "
                     "the stages': max abs diff {:.1e}, {:.1e}, {:.1e}, {:.1e}",
                     c, q, k, v));
  return std::max({worst, c, q, k, v});
}

} // namespace headgrad::cli::explain
