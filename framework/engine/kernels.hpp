// kernels.hpp - the seam between the book (framework/core, ops, nn, optim, models) and the engine
// (framework/engine): the one engine header a book file may include.
//
// Reference mode: the book runs alone. Every kernel entry point runs the plain loop kept beside
// its op in the book, loops run on the calling thread, storage comes from plain aligned
// allocation (no caching allocator), and the engine's thread pools stay idle. It is on from the
// start when the environment holds HEADGRAD_REFERENCE=1, and a program or test switches it with
// set_reference() (tests run fast and reference mode in one process).
#pragma once

namespace headgrad::runtime {

// Whether reference mode is on (see above). One relaxed atomic load.
bool reference();
// Turns reference mode on or off for every thread of the process. Call it between steps, not
// while a kernel runs.
void set_reference(bool on);

} // namespace headgrad::runtime
