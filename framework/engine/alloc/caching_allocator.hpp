// caching_allocator.hpp - the blocks behind tensors' storage (the seam's kernels::allocate and
// kernels::release, framework/engine/kernels.hpp), drawn from a cache.
//
// Training builds and frees the same set of activations every step. Returning freed blocks to a
// per-size free list instead of the system allocator makes step N+1 reuse step N's memory: no
// malloc on the hot path after warm-up and a flat RSS (see docs and the soak benchmark). Blocks
// of 64 KiB and more are cut from arenas of huge pages. In reference mode (and under
// AddressSanitizer) every block is the system allocator's, freed at once, and these statistics do
// not move.
#pragma once
#include <cstddef>

namespace headgrad {

struct AllocatorStats {
  std::size_t bytes_in_use;    // held by live tensors
  std::size_t bytes_cached;    // freed, kept for reuse
  std::size_t system_allocs;   // calls that reached the system allocator
  std::size_t cache_hits;      // allocations served from the cache
  std::size_t other_thread_hits; // of those, blocks another thread used last (none of its own was free)
  std::size_t arena_bytes;     // address space of the huge-page arenas blocks of 64 KiB and more are cut from
};
AllocatorStats allocator_stats();
// Returns every cached block to the system (tests and memory-pressure handling): the memory of
// an arena block goes back at once, its address range when its whole arena is back.
void allocator_release_cache();

// The end of a training step: the cached blocks that the step now ending did not reuse - given
// back before it began and still cached - are returned to the system (as allocator_release_cache
// does). A step reuses what the step before it freed, so in a steady run nothing is returned and
// nothing is slower; what a step no longer uses (the blocks of another shape, of an evaluation,
// of the first step's one-off temporaries) stops holding memory after one step.
void allocator_end_step();

// For a phase whose blocks differ from a training step's (evaluating, drawing the attention
// weights): the cache is returned to the system when it begins and when it ends, so that the
// phase's blocks and the step's cached ones are never resident at once. Peak memory is that of
// the larger of the two, not their sum; the next step takes its blocks from the system again.
class AllocatorPhase {
public:
  AllocatorPhase() { allocator_release_cache(); }
  ~AllocatorPhase() { allocator_release_cache(); }
  AllocatorPhase(const AllocatorPhase&) = delete;
  AllocatorPhase& operator=(const AllocatorPhase&) = delete;
};

} // namespace headgrad
