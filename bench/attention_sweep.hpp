// attention_sweep.hpp - `headgrad_bench --attention-sweep`: the fused attention's two algorithms
// (keeping the weights P, or FlashAttention-2 tiles) timed side by side over sequence lengths, the
// measurement behind kernels::flash_attention_pays.
#pragma once

namespace headgrad::bench {

// Prints one row per (head size, T): forward + backward ms of each algorithm, their ratio and the
// one flash_attention_pays picks. threads: OpenMP threads (the kernels split the heads over them).
void run_attention_sweep(int threads);

} // namespace headgrad::bench
