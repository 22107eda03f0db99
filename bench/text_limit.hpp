// text_limit.hpp - `headgrad_bench --text-limit CHECKPOINT`: the sgemm limit of a text run's
// training step (its shapes and vocabulary read from the checkpoint's metadata), for
// `./dev.sh bench text` (bench/text_lm.py), which compares both frameworks' rates with it.
#pragma once
#include <string>

namespace headgrad::bench {

// Prints one JSON object: the step's FLOPs (flop_model.hpp), the sgemm limit measured on its gemm
// mix with `threads` threads (sgemm_limit.hpp, `min_seconds` per shape) and the config's shape.
void run_text_limit(const std::string& checkpoint, int threads, double min_seconds);

} // namespace headgrad::bench
