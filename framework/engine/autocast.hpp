// autocast.hpp - bf16 mixed precision for a scope, as torch.autocast('cpu', dtype=torch.bfloat16)
// does it for linear layers:
//
//   {
//     runtime::Autocast bf16(model.named_parameters()); // the weights rounded to bf16, once
//     Tensor loss = ...forward...;                      // linear layers' gemms: bf16 inputs,
//     loss.backward();                                  //   float32 accumulation and output
//   }
//   optimizer.step();                                   // float32, outside the guard
//
// Inside the guard the matmul precision (kernels.hpp) is bf16: the gemms of linear layers - the
// forward y = x W^T, and the backward's dx = dy W and dW = dy^T x (a tied output layer's too) -
// take bf16 inputs and accumulate in float32 (framework/engine/blas/linear_gemm.hpp). Everything
// else stays float32: the attention kernels' per-head products, softmax, layer norm, GELU, the
// losses, every gradient buffer (a gemm writes or adds float32), clipping, the optimizer and its
// state, the master weights themselves, the all-reduce; double never changes.
//
// The weights. On entry the guard rounds each float32 buffer it is given to a bf16 copy; a gemm
// operand lying inside one of those buffers (found by its address) is read from the copy, so a
// weight used by several gemms - forward, dx, every shard's replica sharing its memory - is
// converted once per guard, i.e. once per training step. No gemm may read a buffer after it
// changed while the guard lives (a copy made on entry would not see the change): step the
// optimizer after the guard closes, or - as `headgrad train` does - after the step's last gemm,
// just before it closes.
//
// Everything else - activations, gradients - is rounded inside each gemm call, into the calling
// thread's scratch, and never looked up by address: within a step the caching allocator hands a
// freed buffer's address to the next tensor, and some ops write their output over an input, so
// the same address holds other values from one gemm to the next.
//
// Guards nest (the innermost one's weights and precision count; each restores what it found) and
// are process-wide, like the precision: open one on the thread that starts a step, before its
// worker threads run, and close it after they finish. Autocast(weights, MatmulPrecision::f32)
// runs its scope in float32. In reference mode, or on a CPU without bf16 instructions, a bf16
// guard throws as set_matmul_precision does.
#pragma once
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "framework/engine/kernels.hpp"

namespace headgrad::runtime {

// A float32 weight: `count` contiguous floats at `data`.
struct WeightBuffer {
  const float* data = nullptr;
  std::int64_t count = 0;
};

// The float32 weights among a model's parameters: model.named_parameters() (pairs of a name and a
// Tensor) or a list of Tensors; the others (float64, non-contiguous) are left to the per-call
// conversion. (A template, so that the engine includes nothing of the book.)
template <typename Params> std::vector<WeightBuffer> float32_weights(const Params& params) {
  std::vector<WeightBuffer> out;
  for (const auto& item : params) {
    const auto& t = [&]() -> const auto& {
      if constexpr (requires { item.second.numel(); }) return item.second;
      else return item;
    }();
    using DType = std::remove_cvref_t<decltype(t.dtype())>;
    if (t.defined() && t.dtype() == DType::f32 && t.is_contiguous() && t.numel() > 0)
      out.push_back({t.template data<float>(), t.numel()});
  }
  return out;
}

class Autocast {
public:
  explicit Autocast(const std::vector<WeightBuffer>& weights, MatmulPrecision precision = MatmulPrecision::bf16);
  template <typename Params>
    requires(!std::is_convertible_v<const Params&, const std::vector<WeightBuffer>&>)
  explicit Autocast(const Params& params, MatmulPrecision precision = MatmulPrecision::bf16)
      : Autocast(float32_weights(params), precision) {}
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

  struct Copies; // the bf16 copies of the weights (autocast.cpp)

private:
  MatmulPrecision before_;
  std::shared_ptr<const Copies> mine_, outer_;
};

// What the guards and the bf16 gemms did in this process (relaxed counters, for tests and benchmarks).
struct AutocastStats {
  std::int64_t weight_buffers = 0;      // weight buffers rounded to bf16 on entering a guard
  std::int64_t weight_elements = 0;     // their floats
  std::int64_t weight_reads = 0;        // bf16 gemm operands read from those copies
  std::int64_t operand_conversions = 0; // bf16 gemm operands rounded in the call (activations, gradients)
  std::int64_t operand_elements = 0;    // their floats
};
AutocastStats autocast_stats();

} // namespace headgrad::runtime
