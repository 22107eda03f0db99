// dropout_state.hpp - the state of every dropout generator of a run, so that a resumed run draws
// the masks the uninterrupted one would have (torch.get_rng_state / set_rng_state in a PyTorch
// checkpoint). The workers of every rank draw masks of their own (thread replicas and ranks have
// generators seeded apart): all of them are kept, each under its rank, worker and module name:
//   "rng.rank0.worker1.blks.0.addnorm1.dropout"  int64 (6): the four xoshiro words, has_spare,
//                                                 spare (the words and the double as raw bits)
#pragma once
#include <cstdint>

#include "models/token_model.hpp"
#include "train/thread_replicas.hpp"

namespace headgrad::train {

// This rank's workers' generators (the model is worker 0; replicas, if any, 1, 2, ...), gathered
// from every rank when there are several (a collective: every rank calls it at the same step).
NamedTensors dropout_states(models::TokenModel& model, ThreadReplicas* replicas);

// Sets every generator of this rank's workers that `states` holds an entry for. Generators without
// one (a run resumed with more threads or ranks than it was saved with) keep their seeded state.
// Throws std::invalid_argument naming `source` and the entry if one is malformed.
void restore_dropout_states(const NamedTensors& states, models::TokenModel& model, ThreadReplicas* replicas,
                            const std::string& source);

// Whether a checkpoint tensor name is a dropout state (kept beside the optimizer's state).
bool is_dropout_state(const std::string& name);

} // namespace headgrad::train
