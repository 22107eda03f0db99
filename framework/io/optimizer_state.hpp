// optimizer_state.hpp - a checkpoint's tensors read back into what wrote them: an optimizer's state
// (optim::Optimizer::state(): its buffers and step counts). The tensors come from a file
// (framework/io/safetensors.hpp) or anywhere else; they are checked against the optimizer before
// any is copied, so a refused file changes nothing.
#pragma once
#include <string>

#include "framework/core/tensor.hpp"
#include "framework/optim/optimizer.hpp"

namespace headgrad::io {

// Copies `state` into the optimizer's state: every entry of optimizer.state() but the step counts
// must be there with the same shape and dtype (extra entries are ignored), and "step" must be
// there (int64, >= 0); a parameter without "step.<name>" gets "step" as its own count, so states
// written before per-parameter counts existed load unchanged. Otherwise std::invalid_argument
// naming `source` (e.g. the file) and the entry.
void restore_optimizer_state(optim::Optimizer& optimizer, const NamedTensors& state, const std::string& source);

} // namespace headgrad::io
