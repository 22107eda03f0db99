// replica_parameters.hpp - data parallelism over the threads of one process: a replica of a model
// reads the model's parameter values (one copy in memory) and keeps gradients of its own, so that
// threads can run forward and backward side by side, each into its own gradients, and the
// gradients are added up afterwards (train/parallel/thread_replicas.hpp adds them in the shard
// tree instead; docs/cpp-guide.md#threads shows both calls in a program of one's own).
//
// Each function takes two parameter lists (a module's named_parameters()) with the same names,
// shapes and dtypes, as two instances of one model have; std::invalid_argument otherwise.
#pragma once
#include <string>

#include "framework/core/tensor.hpp"

namespace headgrad::distributed {

// Makes every parameter of `replica` share its values (its storage) with the same-named one of
// `source`, while keeping a gradient of its own (its gradient is dropped): the replica sees every
// update of the source's values. Module::to on either side ends the sharing.
void share_parameters(const NamedTensors& replica, const NamedTensors& source);

// Adds `from`'s gradients into `into`'s and clears from's: how replicas' gradients come back to
// the model. A gradient `into` does not have yet is taken over without a copy.
void take_gradients_from(const NamedTensors& into, const NamedTensors& from);

// std::invalid_argument "<what> (<a's count> and <b's count> parameters, or names, shapes or
// dtypes)" unless `a` and `b` have the same names, shapes and dtypes in the same order.
void check_same_parameters(const NamedTensors& a, const NamedTensors& b, const std::string& what);

} // namespace headgrad::distributed
