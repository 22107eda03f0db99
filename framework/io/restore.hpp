// restore.hpp - a checkpoint's tensors read back into what wrote them: a module's parameters
// (nn::Module::named_parameters()) and an optimizer's state (optim::Optimizer::state(): its buffers
// and step counts). The tensors come from a file (framework/io/safetensors.hpp), a fixture or
// another model; they are checked before any is copied, so a refused file changes nothing, and
// every refusal is a std::invalid_argument naming `source` (e.g. the file) and the entry.
#pragma once
#include <string>

#include "framework/core/tensor.hpp"
#include "framework/nn/module.hpp"
#include "framework/optim/optimizer.hpp"

namespace headgrad::io {

// Copies `values` into the module's parameters (the handles stay valid): every parameter must be
// there, once, with its shape and a float dtype (another float dtype is converted); a name the
// module does not have is refused.
void restore_parameters(const nn::Module& module, const NamedTensors& values, const std::string& source);

// Copies `state` into the optimizer's state: every entry of optimizer.state() but the step counts
// must be there with the same shape and dtype (extra entries are ignored), and "step" must be
// there (int64, >= 0); a parameter without "step.<name>" gets "step" as its own count, so states
// written before per-parameter counts existed load unchanged.
void restore_optimizer_state(optim::Optimizer& optimizer, const NamedTensors& state, const std::string& source);

} // namespace headgrad::io
