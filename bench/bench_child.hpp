// bench_child.hpp - the measuring side of the benchmark. The parent writes a spec (JSON) and the
// inputs the PyTorch script needs (initial weights, batches, held-out set) to a temp directory,
// then runs `headgrad_bench --child SPEC` in a fresh process per measurement, so each config's
// peak RSS is its own. The child writes its result next to the spec.
#pragma once
#include <cstdint>
#include <string>

#include "bench/bench_config.hpp"

namespace headgrad::bench {

// Writes DIR/TAG.weights.safetensors (the initial parameters, names = PyTorch state_dict) and
// DIR/TAG.data.safetensors: "pos_encoding" (T, d), "tokens"/"targets" (S, B, T) and "valid_lens"
// (S, B) for training batches 0..S-1 exactly as `headgrad train` draws them, and, if eval_count
// > 0, the held-out set "eval_tokens"/"eval_targets" (N, T) and "eval_valid_lens" (N).
void export_inputs(const std::string& dir, const std::string& tag, const train::RunConfig& cfg,
                   std::int64_t num_batches, std::int64_t eval_count);

// Runs the measurement the spec asks for ("throughput", "tta" or "soak") and writes its result
// to the spec's "result" path. Returns the process exit code.
int run_child(const std::string& spec_path);

} // namespace headgrad::bench
