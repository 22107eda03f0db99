// trainer.hpp - the training loop for a model of your own: train::Trainer takes a factory that
// builds the model (any nn::Module), its loss on a batch, an optimizer and a data source
// (train/fit/data_source.hpp), and trains it with what `headgrad train` guarantees:
//   - checkpoints in options.out_dir (model.safetensors, optimizer.safetensors with the dropout
//     generators' states), written atomically with checksums, so a kill at any moment leaves a
//     complete checkpoint;
//   - exact resume: a Trainer on a directory with a checkpoint continues it, and ends with the bits
//     of the run that was never interrupted;
//   - a stop signal (SIGINT, SIGTERM, SIGHUP, after train::install_interrupt_handler()) saves a
//     checkpoint and returns; a non-finite loss or gradient throws NonFiniteError naming the step,
//     the tensor and the intact checkpoint, before the update;
//   - metrics.csv (a row per step, one per evaluation) and progress lines on stdout;
//   - thread shards: every batch cut into options.shards shards spread over options.threads
//     threads, with bits that depend on the shard count alone (1 thread or 4: the same);
//   - MPI ranks: every rank of a job runs the same program; the shards are spread over the ranks
//     too (same bits again), rank 0 alone writes and prints, and the ranks check that they start
//     from the same parameters and end with them (distributed::CollectiveError otherwise).
//
//   auto trainer = train::Trainer<Net>([] { return std::make_unique<Net>(); },
//       [](Net& net, const train::Batch& b) { Tensor d = net.forward(b["x"]) - b["y"]; return ops::mean(d * d); },
//       [](nn::NamedTensors p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions{}); },
//       MySource{}, {.out_dir = "run", .steps = 1000});
//   train::FitSummary done = trainer.fit();
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/nn/module.hpp"
#include "framework/optim/optimizer.hpp"
#include "train/fit/data_source.hpp"
#include "train/loop/stop_signal.hpp"
#include "train/loop/train_step.hpp" // NonFiniteError

namespace headgrad::train {

struct TrainerOptions {
  std::string out_dir = {};   // the run's directory: model.safetensors, optimizer.safetensors, metrics.csv
  std::int64_t steps = 0;     // optimizer steps in all (a resumed run continues up to this many)
  std::uint64_t seed = 0;     // the dropout generators' (the model's initial values are its factory's)
  int threads = 1;            // threads training this process's shards, one model replica each
  std::int64_t shards = 0;    // S: every batch is cut into S shards (0: threads x ranks); the bits depend on S
  double clip = 0;            // bound on the global gradient norm (0: no clipping)
  std::function<double(std::int64_t step)> lr = {}; // step s's learning rate (empty: the optimizer's own)
  std::int64_t eval_every = 0; // with an evaluation: after every this many steps (and after the last)
  std::int64_t save_every = 0; // a checkpoint after every this many steps (always after the last one)
  bool resume = true;         // out_dir holds a checkpoint: continue it (false: refuse, unless overwrite)
  bool overwrite = false;     // out_dir holds another run's checkpoint: replace it
  bool quiet = false;         // no progress on stdout
};

struct FitSummary {
  std::int64_t start = 0;      // steps done before this fit() (a resumed run's checkpoint)
  std::int64_t steps = 0;      // steps done in all
  std::vector<double> losses = {}; // this fit()'s training loss of every step, in order
  double eval_loss = 0;        // the last evaluation's value (NaN: none)
  bool interrupted = false;    // stopped by a signal (after saving, unless it came before the first step)
  int stop_signal = 0;         // which
  std::string checkpoint = {};    // the newest checkpoint's model file ("": none)
  double seconds = 0;          // wall time of fit()
};

namespace detail {
// The Trainer without its Model type (train/fit/trainer.cpp).
class TrainerCore {
public:
  using Factory = std::function<std::unique_ptr<nn::Module>()>;
  using Loss = std::function<Tensor(nn::Module&, const Batch&)>;
  using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(nn::NamedTensors)>;
  using Evaluate = std::function<double(nn::Module&)>;
  TrainerCore(Factory factory, Loss loss, MakeOptimizer make_optimizer, std::function<Batch(std::uint64_t)> data,
              TrainerOptions options);
  ~TrainerCore();
  TrainerCore(TrainerCore&&) noexcept;
  void set_evaluate(Evaluate evaluate);
  FitSummary fit();
  nn::Module& model();
  optim::Optimizer& optimizer();
  std::int64_t step() const;

private:
  struct State;
  std::unique_ptr<State> s_;
};
} // namespace detail

// Trains a Model (an nn::Module) built by `factory`. The constructor builds the model, its
// optimizer and its thread replicas (each replica another factory() whose parameters then share
// the model's values), locks out_dir for the Trainer's lifetime and loads the checkpoint there, if
// any (the model's parameters, the optimizer's state and step count, the dropout generators); the
// factory must build the same architecture every time. fit() trains steps start + 1 .. options.steps.
//
// `loss(model, batch)` returns a scalar tensor: the mean of a per-row loss over the batch's rows
// (with shards, shard k's loss is weighted by its share of the rows, so that the shards' losses add
// up to the batch's). It runs in training mode; the evaluation, if given, in evaluation mode and
// under NoGradGuard.
//
// Refused (std::invalid_argument, one line): options.steps < 1, an empty out_dir, shards more
// than a batch's rows, a checkpoint of another shard count, a directory another run holds or
// whose checkpoint is not to be resumed. In reference mode (runtime::reference()) one thread and
// one shard only.
template <typename Model>
class Trainer {
public:
  using Factory = std::function<std::unique_ptr<Model>()>;
  using Loss = std::function<Tensor(Model&, const Batch&)>;
  using MakeOptimizer = detail::TrainerCore::MakeOptimizer;
  using Evaluate = std::function<double(Model&)>;

  template <DataSource Data>
  Trainer(Factory factory, Loss loss, MakeOptimizer make_optimizer, Data data, TrainerOptions options)
      : core_([factory] { return std::unique_ptr<nn::Module>(factory()); },
              [loss](nn::Module& m, const Batch& b) { return loss(static_cast<Model&>(m), b); },
              std::move(make_optimizer),
              [data = std::move(data)](std::uint64_t i) mutable { return Batch(data.batch(i)); },
              std::move(options)) {}

  // `evaluate(model)`: a number to log (e.g. a held-out loss), after every options.eval_every
  // steps and after the last; in metrics.csv's eval_loss column and on stdout.
  Trainer& evaluate_with(Evaluate evaluate) {
    core_.set_evaluate([evaluate = std::move(evaluate)](nn::Module& m) { return evaluate(static_cast<Model&>(m)); });
    return *this;
  }

  FitSummary fit() { return core_.fit(); }
  Model& model() { return static_cast<Model&>(core_.model()); }
  optim::Optimizer& optimizer() { return core_.optimizer(); }
  std::int64_t step() const { return core_.step(); } // steps done (a resumed checkpoint's, then fit()'s)

private:
  detail::TrainerCore core_;
};

} // namespace headgrad::train
