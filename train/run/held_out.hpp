// held_out.hpp - what evaluating on a run's held-out set reads and reports: the set a chunk at a
// time (TaskData::eval_rows), how large a chunk is, and the result (train/loop/evaluate.hpp
// computes it; metrics.csv logs it).
#pragma once
#include <cstdint>
#include <functional>

#include "data/tasks.hpp"

namespace headgrad::train {

struct EvalResult {
  double loss = 0, token_acc = 0, seq_acc = 0;
};

// How many positions (sequences x padded length) evaluate() runs through the model at once.
inline constexpr std::int64_t kEvalChunkTokens = 16384;

// A held-out set read a chunk at a time: next(n) returns its next (up to) n rows, a Batch with
// undefined tensors at its end. Memory does not grow with the set's size.
using EvalRows = std::function<data::Batch(std::int64_t max_rows)>;

} // namespace headgrad::train
