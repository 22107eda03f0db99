// memory_estimate.hpp - how much memory a training run needs at least, so that a configuration
// that cannot fit (--batch 100000000) is refused at start-up with both numbers, instead of ending
// in std::bad_alloc or the kernel's OOM killer after minutes.
//
// The estimate is a lower bound: it counts only buffers a training step certainly holds at once,
// so a run it refuses could not have run, while a run it lets through may still need more (the
// allocator's cache, attention scores, BLAS workspaces). Per rank, in bytes:
//   parameters, their gradients and the optimizer state     4 P (2 + 2 for Adam, + 1 for SGD)
//   the batch: tokens and targets (int64), every rank's     16 B T
//   the activations backward needs for this rank's rows     4 N (L (6 d + f) + 2 V), N = B T / ranks
//     (each block keeps at least its input, the attention's Q, K, V and output, the residual sum
//     and the FFN's hidden layer; the logits and their softmax)
//   an evaluation chunk's logits                             4 kEvalChunkTokens V
//   the text corpus's tokens (TokenSequence)
// tests/test_bounds.cpp checks that real runs use more than this.
#pragma once
#include <cstdint>
#include <string>

#include "train/run/run_config.hpp"

namespace headgrad::train {

struct MemoryEstimate {
  double bytes = 0;     // at least this much (a double: a hostile configuration exceeds 2^64)
  std::string parts;    // "parameters and optimizer 1.2 MiB, batch 10 GiB, activations 80 GiB, ..."
};

// `corpus_bytes`: the memory of the text corpus's tokens (0 for a toy task).
MemoryEstimate training_memory(const RunConfig& cfg, int ranks, double corpus_bytes);

// The machine's physical memory (sysconf); 0 if unknown.
double physical_memory_bytes();

// "1.5 GiB", "12.0 MiB"
std::string byte_size(double bytes);

// Throws std::invalid_argument when `estimate` (per rank, `ranks_here` of them on this machine)
// exceeds the machine's physical memory, naming both, what the estimate is made of and the flags
// that size it:
//   "this run needs at least 95.4 GiB of memory (parameters and optimizer 1.2 MiB, batch ...),
//    more than this machine's 23.4 GiB; use a smaller --batch, --max-len or model"
void check_fits_in_memory(const MemoryEstimate& estimate, const RunConfig& cfg, int ranks_here);

} // namespace headgrad::train
