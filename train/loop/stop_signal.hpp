// stop_signal.hpp - asking a training run to stop between steps and save: SIGINT, SIGTERM and
// SIGHUP set a flag that `headgrad train`'s loop (train/loop/trainer.hpp) and the Trainer
// (train/fit/trainer.hpp) check after each step; they save a checkpoint and return, saying which
// signal it was. A second signal ends the process at once, as the signal's default action (every
// checkpoint on disk stays complete: they are written atomically).
#pragma once

namespace headgrad::train {

// Installs the handler for SIGINT, SIGTERM and SIGHUP (replacing what was there). Call it first
// thing, before the run starts up: a signal that comes before the first step is kept, and the run
// stops before that step.
void install_interrupt_handler();
// What the handler does, as for SIGINT (for tests, or a program's own reasons to stop).
void request_stop();
// The signal that asked the run to stop and that no run has handled yet (0: none).
int pending_stop_signal();
// The run has stopped for it: the flag is cleared.
void clear_stop_signal();

} // namespace headgrad::train
