// memory_estimate.hpp - how much memory a training run needs, so that a configuration that cannot
// fit (--batch 100000000) is refused at start-up with both numbers, instead of ending in
// std::bad_alloc or the kernel's OOM killer after minutes.
//
// The estimate is an upper bound of the run's peak resident memory, meant to be within 1.5x of it
// (tests/test_bounds.cpp runs a grid of configurations and compares). Per rank, in bytes:
//   the process (program, libraries, thread stacks, BLAS buffers)  kProcessBytes (+ a little per thread)
//   parameters, their gradients and the optimizer state            4 P (2 + 2 for Adam, + 1 for SGD with momentum)
//   the text corpus's tokens (TokenSequence)
//   and the largest of the phases below, which never hold memory at once (the allocator's cache is
//   emptied as an evaluation or a picture begins and ends: framework/engine/alloc/):
//   - a training step: for N = B T / ranks positions, what backward keeps of every block (its
//     input, Q, K, V, the attention's output, projections, residual sums and norms: 10 d; the FFN's
//     hidden layer before and after its activation: 2 f; the attention weights and their gradient,
//     2 H T, when the fused attention keeps them - short sequences, dropout - else its output, each
//     row's log-sum-exp and the backward's dQ, dK, dV: 4 d + H), the embeddings (2 d), the
//     logits, their softmax and gradient (2.5 V), all floats
//   - an evaluation chunk: min(--eval-count, the sequences of kEvalChunkTokens positions) through
//     the model without a graph: a few activations of a block at once and the logits
//   - the attention picture (toy tasks): every layer's H T x T weights of one sequence
//   each times kAllocatorSlack: block sizes are rounded up (at most 25%) and a step's freed blocks
//   wait in the cache for the next step's.
#pragma once
#include <cstdint>
#include <string>

#include "train/run/run_config.hpp"

namespace headgrad::train {

struct MemoryEstimate {
  double bytes = 0;     // at most this much (a double: a hostile configuration exceeds 2^64)
  std::string parts;    // "the process 20.0 MiB, parameters and optimizer state 1.2 MiB, a training step 80 GiB, ..."
  std::string advice;   // the flags that size its largest part: "a smaller --batch or --max-len, or a smaller model"
};

inline constexpr double kProcessBytes = 20.0 * (1 << 20);
inline constexpr double kProcessBytesPerThread = 4.0 * (1 << 20);
inline constexpr double kAllocatorSlack = 1.3;

// `corpus_bytes`: the memory of the text corpus's tokens (0 for a toy task); `eval_count`: the
// run's --eval-count; `threads`: its threads on this rank.
MemoryEstimate training_memory(const RunConfig& cfg, int ranks, double corpus_bytes, std::int64_t eval_count = 1000,
                               int threads = 1);

// The machine's physical memory (sysconf); 0 if unknown.
double physical_memory_bytes();

// The memory available to a new process now: MemAvailable of /proc/meminfo (free memory and what
// the kernel can reclaim without swapping), else the physical memory; 0 if neither is known.
double available_memory_bytes();

// "1.5 GiB", "12.0 MiB"
std::string byte_size(double bytes);

// Throws std::invalid_argument when `estimate` (per rank, `ranks_here` of them on this machine)
// exceeds the memory available now, naming both, what the estimate is made of and the flags that
// size its largest part:
//   "this run needs about 95.4 GiB of memory (the process 20.0 MiB, ...), more than the 20.1 GiB
//    available on this machine (MemAvailable); use a smaller --batch or --max-len, or a smaller model"
void check_fits_in_memory(const MemoryEstimate& estimate, const RunConfig& cfg, int ranks_here);

} // namespace headgrad::train
