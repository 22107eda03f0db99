// evaluate.hpp - held-out loss and accuracy of a model, as `headgrad train` reports them and
// `headgrad eval` prints them.
#pragma once
#include "data/tasks.hpp"
#include "models/token_model.hpp"
#include "train/run/held_out.hpp"

namespace headgrad::train {

// Mean masked cross-entropy per valid token, token and sequence accuracy of greedy predictions;
// in eval mode (no dropout) and without a graph, in chunks of about kEvalChunkTokens positions.
// The model's train/eval mode is restored.
EvalResult evaluate(models::TokenModel& model, const data::Batch& eval_set);

// The same over a held-out set read a chunk at a time (TaskData::eval_rows): memory does not grow
// with the set's size; the result equals evaluate() of the whole set.
EvalResult evaluate(models::TokenModel& model, const EvalRows& next, std::int64_t sequence_length);

} // namespace headgrad::train
