// step_graph.hpp - the autograd graph of one training step of the reference model: forward,
// the masked cross-entropy and backward, as `headgrad train --graph FILE` draws it.
#pragma once
#include "data/tasks.hpp"
#include "framework/io/graph_dot.hpp"
#include "models/token_model.hpp"

namespace headgrad::train {

// Runs the model on `batch`, the loss train_step minimises, and backward (into the model's
// gradients, zeroed first), recording the graph with every node's gradient norm. Parameters are
// named as in the checkpoint.
Graph training_step_graph(models::TokenModel& model, const data::Batch& batch);

} // namespace headgrad::train
