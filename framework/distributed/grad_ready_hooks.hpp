// grad_ready_hooks.hpp - gradient-ready hooks (PyTorch's Tensor.register_post_accumulate_grad_hook).
// In a backward, a leaf's gradient is final once the last node that writes into it has run; the
// backward then calls the leaf's hook, while it goes on with the nodes left. Data-parallel training
// starts the all-reduce of a bucket of gradients from these calls (bucketed_allreduce.hpp), so that
// communication overlaps the rest of backward (PyTorch DDP: Li et al., "PyTorch Distributed", VLDB
// 2020). The hooks watch every backward through the core's BackwardWatch
// (framework/core/autograd.hpp): each counts, per hooked leaf of its walk, the nodes that write
// into it, and calls the hook when the last of them is done.
//   - A hook runs once per backward that reaches the leaf, on the thread running that backward
//     (under its NoGradGuard), also when no node wrote a gradient (grad() then holds what it held
//     before).
//   - Nodes that share no leaf may run before or after it, so it must not touch other leaves'
//     gradients, nor install or remove hooks; an exception it throws ends the backward.
#pragma once
#include <functional>

#include "framework/core/tensor.hpp"

namespace headgrad::distributed {

using GradReadyHook = std::function<void()>;
// Installs `leaf`'s hook, replacing any; an empty hook removes it. Not while a backward runs.
// std::logic_error for a tensor an op produced (its gradient is not kept, so it never becomes final).
void set_grad_ready_hook(const Tensor& leaf, GradReadyHook hook);

} // namespace headgrad::distributed
