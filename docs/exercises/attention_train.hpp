// attention_train.hpp - the attention-backward exercise's program: the check of every tensor you
// compute (attention_forward.hpp), and with --train the training of the default sort model with
// your backward in every attention layer (makemore part 4's last step: train with the backward you
// wrote). You do not need to read this file to do the exercise.
//
// How your backward gets into the model: models::MultiHeadAttention runs a layer's forward through
// its `own` function when one is set (models/attention.hpp). Here that function is one custom
// autograd op (headgrad::record, as every op in framework/ops/ is written): its forward is
// attention_forward(), the forward you differentiated, and its backward is your_backward(), your
// nine steps chained. Everything else - the embedding, AddNorm, the FFN, the loss, the textbook
// step of train/loop/train_step.cpp with its clipping and Adam - is the library's.
#pragma once
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "docs/exercises/attention_forward.hpp"
#include "framework/core/autograd.hpp"
#include "framework/engine/runtime/startup.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "models/transformer.hpp"
#include "train/loop/evaluate.hpp"
#include "train/loop/train_step.hpp"
#include "train/run/run_model.hpp"
#include "train/run/run_optimizer.hpp"
#include "train/run/task_data.hpp"

// One attention layer as one op: the forward is attention_forward() on the layer's weights, the
// backward your nine steps. Self-attention (the encoder's attention(X, X, X, valid_lens)) passes X
// as both inputs, and autograd adds your dX and dZ into X's gradient.
inline Tensor attention_with_your_backward(models::MultiHeadAttention& mha, const Tensor& queries, const Tensor& keys,
                                           const Tensor& values, const Tensor& valid_lens) {
  if (!keys.same(values))
    throw std::invalid_argument("your backward: keys and values must be one tensor Z, as in attention(X, Z, Z)");
  if (mha.W_q->bias.defined())
    throw std::invalid_argument("your backward: the exercise's layer has no biases (d2l's bias=False)");
  if (mha.attention->dropout->training() && mha.attention->dropout->p > 0)
    throw std::invalid_argument("your backward: train without dropout (the model's default, --dropout 0)");
  const Tensor W[4] = {mha.W_q->weight, mha.W_k->weight, mha.W_v->weight, mha.W_o->weight};
  Forward f;
  {
    headgrad::NoGradGuard no_grad; // the op records one node, not the ops inside it
    f = attention_forward(queries.detach(), keys.detach(), valid_lens, W[0].detach(), W[1].detach(), W[2].detach(),
                          W[3].detach(), mha.num_heads);
  }
  const Tensor Y = f.Y;
  f.Y = Tensor(); // the node keeps what backward reads, never its own output (autograd.hpp)
  return headgrad::record(Y, "attention (your backward)", {queries, keys, W[0], W[1], W[2], W[3]},
                          [f](headgrad::Node& n, const Tensor& dY) {
                            const YourGradients g = your_backward(f, dY);
                            const std::pair<const char*, const Tensor*> grads[] = {
                                {"dX", &g.dX}, {"dZ", &g.dZ}, {"dW_q", &g.dW_q},
                                {"dW_k", &g.dW_k}, {"dW_v", &g.dW_v}, {"dW_o", &g.dW_o}};
                            for (std::size_t i = 0; i < 6; ++i) {
                              if (!n.needs_grad(i)) continue;
                              if (!grads[i].second->defined())
                                throw std::logic_error(
                                    fmt::format("your backward left {} not computed", grads[i].first));
                              n.add_to_grad(i, *grads[i].second);
                            }
                          });
}

// The first steps of the two runs, whose losses are compared: after step 1 each loss follows
// updates made with one backward or the other.
inline constexpr std::int64_t kComparedSteps = 20;
// The losses may differ by float32 rounding (your steps may add in another order than the
// library's kernels), which a few Adam steps amplify to about 1e-6 by step 20; a relative difference
// above this is not rounding (dZ without its value path in float32 shows 6e-4 by step 4).
inline constexpr double kLossTolerance = 1e-4;

// `headgrad train`'s default run (the sort task, d2l's Transformer encoder, Adam, warmup and cosine
// decay, clipping at 1, seed 0) with d2l's composed attention on one thread, as `headgrad train
// --attention composed --threads 1` runs it; with `yours`, every attention layer's backward is yours.
struct SortRun {
  headgrad::train::RunConfig cfg;
  headgrad::train::TaskData data;
  std::unique_ptr<headgrad::models::TokenModel> model;
  std::unique_ptr<headgrad::optim::Optimizer> optimizer;
  headgrad::optim::LrSchedule schedule;

  static headgrad::train::RunConfig config() {
    headgrad::train::RunConfig c;
    c.attention = "composed";
    return c;
  }
  explicit SortRun(bool yours) : cfg(config()), data(cfg), model(headgrad::train::make_model(cfg, cfg.seed)) {
    if (yours)
      for (auto& blk : dynamic_cast<headgrad::models::SequenceModel&>(*model).blks)
        blk->attention->own = attention_with_your_backward;
    optimizer = headgrad::train::make_optimizer(cfg, model->named_parameters());
    schedule = headgrad::train::lr_schedule(cfg);
  }
  // Step s (1-based) of the run: the textbook step on batch s - 1. Returns the loss.
  double step(std::int64_t s) {
    const headgrad::data::Batch batch = data.batch(static_cast<std::uint64_t>(s - 1), cfg.batch);
    return headgrad::train::train_step(*model, *optimizer, batch, {s, schedule.at(s), cfg.clip}).loss;
  }
};

// --train: the first kComparedSteps losses of your backward's run beside autograd's, then your
// run on until its held-out sequence accuracy reaches 0.99 (evaluated every 100 steps, as
// `headgrad train --eval-every 100`). Returns the
// exit code: 0 when the losses agree and the accuracy is reached.
inline int train_with_your_backward() {
  headgrad::runtime::set_threads(1);
  fmt::print("training the sort model (headgrad train --attention composed --threads 1) with your backward in every "
             "attention layer\n");
  SortRun autograd(false), yours(true);
  fmt::print("step  loss (autograd's backward)  loss (yours)  relative difference\n");
  bool agree = true;
  for (std::int64_t s = 1; s <= kComparedSteps; ++s) {
    const double a = autograd.step(s), y = yours.step(s);
    const double rel = std::abs(y - a) / std::abs(a);
    agree = agree && rel <= kLossTolerance; // false for NaN too
    fmt::print("{:>4}  {:>26.6f}  {:>12.6f}  {:.1e}\n", s, a, y, rel);
  }
  if (!agree) {
    fmt::print("FAIL: the losses differ by more than float32 rounding ({:.0e}): your backward is not autograd's\n",
               kLossTolerance);
    return 1;
  }
  fmt::print("the first {} losses agree within {:.0e}\n", kComparedSteps, kLossTolerance);
  const headgrad::data::Batch held_out = yours.data.eval_set(1000);
  double acc = 0;
  std::int64_t s = kComparedSteps;
  while (s < yours.cfg.steps && acc < 0.99) {
    double loss = 0;
    do loss = yours.step(++s);
    while (s % 100 != 0 && s < yours.cfg.steps);
    acc = headgrad::train::evaluate(*yours.model, held_out).seq_acc;
    fmt::print("step {:>4}  loss {:.4f}  held-out sequence accuracy {:.3f}\n", s, loss, acc);
  }
  if (acc < 0.99) {
    fmt::print("FAIL: held-out sequence accuracy {:.3f} after {} steps, below 0.99\n", acc, s);
    return 1;
  }
  fmt::print("PASS: your backward trained the sort model to held-out sequence accuracy {:.3f} in {} steps\n", acc, s);
  return 0;
}

// The program: the check of every tensor; with --train, when every tensor passes, the training.
inline int attention_exercise_main(int argc, char** argv) {
  headgrad::runtime::configure(argc, argv); // the BLAS kernel and threads' wait policy, as headgrad does
  const bool train = argc == 2 && std::string(argv[1]) == "--train";
  if (argc > 2 || (argc == 2 && !train)) {
    fmt::print(stderr, "usage: {} [--train]\n", argv[0]);
    return 2;
  }
  const int check = check_your_backward();
  if (!train || check != 0) {
    if (train) fmt::print("--train: every tensor must PASS first\n");
    return check;
  }
  fmt::print("\n");
  try {
    return train_with_your_backward();
  } catch (const std::exception& e) {
    fmt::print("FAIL: training stopped: {}\n", e.what());
    return 1;
  }
}
