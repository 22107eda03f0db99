#include "bench/text_limit.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bench/flop_model.hpp"
#include "bench/sgemm_limit.hpp"
#include "framework/engine/blas/bf16_cpu.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/engine/runtime/threads.hpp"
#include "train/run/checkpoint.hpp"

namespace headgrad::bench {

void run_text_limit(const std::string& checkpoint, int threads, double min_seconds) {
  std::int64_t step = 0;
  const train::RunConfig c =
      train::run_config_from_metadata(io::load_safetensors(checkpoint).metadata, checkpoint, step);
  if (!c.is_text())
    throw std::invalid_argument(
        fmt::format("--text-limit: {} is not a text run's checkpoint (task {})", checkpoint, data::task_name(c.task)));
  check_flop_model(c, checkpoint);
  runtime::set_threads(threads);
  const SgemmLimit lim = measure_sgemm_limit(c, min_seconds, threads);
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& x : lim.shapes)
    shapes.push_back(
        {{"shape", x.shape.str()}, {"what", x.shape.what}, {"count", x.shape.count}, {"gflops", x.gflops}});
  const nlohmann::json out = {{"checkpoint", checkpoint},
                              {"config",
                               {{"batch", c.batch},
                                {"context", c.context},
                                {"d_model", c.d_model},
                                {"heads", c.heads},
                                {"layers", c.layers},
                                {"ffn", c.ffn},
                                {"vocab", c.vocab}}},
                              {"threads", threads},
                              {"blas_core", runtime::blas_info().core},
                              {"flops_per_step", step_flops(c)},
                              {"flop_formula", kFlopFormula},
                              {"best_gflops", lim.best_gflops},
                              {"best_shape", lim.best_shape},
                              {"mix_gflops", lim.mix_gflops},
                              {"matmul_ms_per_step", lim.matmul_ms_per_step},
                              {"shapes", shapes}};
  nlohmann::json all = out;
  all["onednn"] = blas::onednn_summary();
  if (blas::bf16_supported()) { // the --precision bf16 step's limit: linear gemms bf16, attention's float32
    const SgemmLimit b = measure_sgemm_limit(c, min_seconds, threads, true);
    all["bf16_mix_gflops"] = b.mix_gflops;
    all["bf16_matmul_ms_per_step"] = b.matmul_ms_per_step;
  }
  fmt::print("{}\n", all.dump());
}

} // namespace headgrad::bench
