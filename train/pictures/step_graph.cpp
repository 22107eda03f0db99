#include "train/pictures/step_graph.hpp"

#include "framework/ops/nn_ops.hpp"

namespace headgrad::train {

Graph training_step_graph(models::TokenModel& model, const data::Batch& batch) {
  model.zero_grad();
  const Tensor logits = model.forward(batch.tokens, batch.valid_lens); // (B, T, V)
  // the mean cross-entropy over the valid positions, as train_step computes it
  const Tensor loss =
      ops::cross_entropy(logits, batch.targets, ops::sequence_mask(batch.valid_lens, batch.tokens.shape()[1]));
  return backward_with_graph(loss, {model.named_parameters(), {}});
}

} // namespace headgrad::train
