// adam_update.hpp - one parameter's Adam / AdamW update (torch.optim.Adam, torch.optim.AdamW in
// PyTorch 1.13, single-tensor path), element by element. optim::Adam::step forms the scalars and
// calls it for each chunk of each parameter; built per instruction set (framework/engine/kernels/isa/), since the loop
// is a sqrt, a division and ~10 flops per element over every parameter each step.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "framework/engine/kernels.hpp"
#include "framework/engine/kernels/isa_namespace.hpp"
#include "framework/engine/kernels/vec_math.hpp"

namespace headgrad::engine {

using kernels::AdamScalars; // (the seam's: kernels.hpp)

HEADGRAD_ISA_BEGIN

// a * b + c rounded once, as PyTorch's vectorised CPU kernels compute `self + alpha * other`
// (add_, add with alpha: Vectorized::fmadd). For float32 the product of two floats is exact in
// double, so the double sum rounded to float is that fused result (a second rounding could differ
// only on an exact tie, about once in 2^29 operations) and it vectorises without FMA hardware.
// std::fma is exact by definition, so every instruction set gives the same bits.
template <typename T> inline T fused_multiply_add(T a, T b, T c) {
  if constexpr (std::is_same_v<T, float>) return static_cast<float>(double(a) * double(b) + double(c));
  else return std::fma(a, b, c);
}

// The loop itself, on the calling thread (optim::Adam::step shares chunks of all the parameters
// over the threads), a function of its own so that __restrict holds (weight, gradient and moments
// are separate buffers) and it vectorises, sqrt and division included; AMSGrad's running max is a
// second instantiation, so the plain loop carries none of it.
template <typename T, bool kAmsgrad>
void adam_update_loop(T* __restrict w, const T* __restrict gr, T* __restrict m, T* __restrict v, T* __restrict vmax,
                      std::int64_t n, const AdamScalars<T> c) {
  for (std::int64_t k = 0; k < n; ++k) {
    T d = c.sign * (gr[k] * c.grad_scale);                         // grad = -grad with maximize (clipped)
    if (c.decoupled) w[k] *= c.decay;                               // AdamW: p.mul_(1 - lr * wd)
    else d = fused_multiply_add(w[k], c.wd, d);                    // Adam: grad.add(p, alpha=wd)
    m[k] = fused_multiply_add(d, c.one_minus_b1, c.b1 * m[k]);     // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    v[k] = fused_multiply_add(c.one_minus_b2 * d, d, c.b2 * v[k]); // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    T vk = v[k];
    if constexpr (kAmsgrad) vk = vmax[k] = max_nan(vmax[k], vk); // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=...)
    w[k] -= c.step_size * m[k] / (std::sqrt(vk) / c.bc2_sqrt + c.eps); // p.addcdiv_(m, sqrt(v) / bc2_sqrt + eps, value=-ss)
  }
}

// w, m, v (and vmax with AMSGrad; null without) updated in place from the gradient gr, n elements,
// on the calling thread.
template <typename T>
void adam_update(T* w, const T* gr, T* m, T* v, T* vmax, std::int64_t n, const AdamScalars<T>& c) {
  if (vmax) adam_update_loop<T, true>(w, gr, m, v, vmax, n, c);
  else adam_update_loop<T, false>(w, gr, m, v, nullptr, n, c);
}

HEADGRAD_ISA_END

} // namespace headgrad::engine
