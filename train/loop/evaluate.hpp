// evaluate.hpp - held-out loss and accuracy of a model, as `headgrad train` reports them and
// `headgrad eval` prints them.
#pragma once
#include <functional>

#include "data/tasks.hpp"
#include "models/token_model.hpp"

namespace headgrad::train {

struct EvalResult {
  double loss = 0, token_acc = 0, seq_acc = 0;
};

// How many positions (sequences x padded length) evaluate() runs through the model at once.
inline constexpr std::int64_t kEvalChunkTokens = 16384;

// Mean masked cross-entropy per valid token, token and sequence accuracy of greedy predictions;
// in eval mode (no dropout) and without a graph, in chunks of about kEvalChunkTokens positions.
// The model's train/eval mode is restored.
EvalResult evaluate(models::TokenModel& model, const data::Batch& eval_set);

// The same over a held-out set read a chunk at a time: next(n) returns its next (up to) n rows,
// a Batch with undefined tensors at its end (TaskData::eval_rows). Memory does not grow with the
// set's size; the result equals evaluate() of the whole set.
using EvalRows = std::function<data::Batch(std::int64_t max_rows)>;
EvalResult evaluate(models::TokenModel& model, const EvalRows& next, std::int64_t sequence_length);

} // namespace headgrad::train
