// progress.hpp - what `headgrad train` shows while it runs: on a terminal a bar with the loss,
// tokens/s and ETA, redrawn at most every 0.1 s; otherwise a line every few steps (20 per run,
// 10 to 500 steps apart); nothing when quiet or printing JSON. Evaluations get a line each.
#pragma once
#include <cstdint>
#include <string>

#include "train/loop/evaluate.hpp"

namespace headgrad::train {

class Progress {
public:
  // Steps start+1 .. total of `tokens_per_step` positions each. `text`: a language model's
  // evaluations, shown as validation loss, bits per token and next-token accuracy.
  // `unit`: what tokens_per_step counts, in the rate shown ("tok/s"; the Trainer's "rows/s").
  Progress(bool quiet, bool json, std::int64_t start, std::int64_t total, std::int64_t tokens_per_step,
           bool text = false, const char* unit = "tok");
  // After step `step`; train_seconds: training time of this invocation so far.
  void step(std::int64_t step, double loss, double lr, double train_seconds);
  void eval(std::int64_t step, const EvalResult& e);
  void interrupted(std::int64_t step, const std::string& model_path);
  void interrupted_at_start(std::int64_t done); // before step done + 1: nothing trained or saved
  void done(); // clears the bar

private:
  bool quiet_, json_, tty_, text_;
  const char* unit_;
  std::int64_t start_, total_, tokens_per_step_, plain_every_;
  double last_draw_ = 0;
};

} // namespace headgrad::train
