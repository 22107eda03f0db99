#include "train/loop/evaluate.hpp"

#include <algorithm>

#include "framework/core/autograd.hpp"
#include "framework/engine/alloc/caching_allocator.hpp"
#include "framework/ops/nn_ops.hpp"

namespace headgrad::train {

EvalResult evaluate(models::TokenModel& model, const data::Batch& eval_set) {
  const std::int64_t n = eval_set.tokens.shape()[0];
  std::int64_t s = 0;
  return evaluate(
      model,
      [&](std::int64_t rows) {
        if (s >= n) return data::Batch{};
        data::Batch b = data::slice_batch(eval_set, s, rows);
        s += rows;
        return b;
      },
      eval_set.tokens.shape()[1]);
}

EvalResult evaluate(models::TokenModel& model, const EvalRows& next, std::int64_t sequence_length) {
  const AllocatorPhase phase; // the training step's cached blocks and the chunks' are never held at once
  NoGradGuard ng;
  const bool was_training = model.training();
  model.eval();
  data::Accuracy acc;
  double loss_sum = 0;
  std::int64_t loss_tokens = 0;
  // Fixed-size chunks of about kEvalChunkTokens positions: memory independent of the set's size
  // (at T = 2048 a chunk is 8 sequences, at T = 16 the whole default set of 1000).
  const std::int64_t chunk = std::max<std::int64_t>(1, kEvalChunkTokens / std::max<std::int64_t>(sequence_length, 1));
  for (data::Batch b = next(chunk); b.tokens.defined(); b = next(chunk)) {
    Tensor logits = model.forward(b.tokens, b.valid_lens);
    Tensor mask = ops::sequence_mask(b.valid_lens, b.tokens.shape()[1]);
    loss_sum += ops::cross_entropy(logits, b.targets, mask).item() * static_cast<double>(b.valid_tokens);
    loss_tokens += b.valid_tokens;
    acc += data::score(data::argmax_last(logits), b);
  }
  model.train(was_training);
  return EvalResult{loss_tokens ? loss_sum / static_cast<double>(loss_tokens) : 0.0, acc.token_acc, acc.seq_acc};
}

} // namespace headgrad::train
