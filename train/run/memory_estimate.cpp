#include "train/run/memory_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "train/run/held_out.hpp"
#include "train/run/run_model.hpp"

namespace headgrad::train {
namespace {

// Whether the fused attention keeps each head's T x T weights for the backward (framework/ops/
// attention.cpp): with dropout, and below the length where recomputing them pays
// (framework/engine/kernels/attention_choice.cpp: 256^2 scores, 384^2 for heads under 32 wide).
bool keeps_weights(const RunConfig& cfg, double T) {
  const double dh = static_cast<double>(cfg.d_model / std::max<std::int64_t>(cfg.heads, 1));
  return cfg.dropout > 0 || T * T < (dh >= 32 ? 256.0 * 256.0 : 384.0 * 384.0);
}

} // namespace

MemoryEstimate training_memory(const RunConfig& cfg, int ranks, double corpus_bytes, std::int64_t eval_count,
                               int threads) {
  const double P = static_cast<double>(parameter_count(cfg));
  const double optimizer_copies = cfg.optimizer == "sgd" ? (cfg.momentum > 0 ? 1 : 0) : 2; // momentum; Adam's m, v
  const double B = static_cast<double>(cfg.batch), T = static_cast<double>(cfg.sequence_length());
  const double N = B * T / std::max(1, ranks); // this rank's positions
  const double d = static_cast<double>(cfg.d_model), f = static_cast<double>(cfg.ffn);
  const double V = static_cast<double>(cfg.vocab), L = static_cast<double>(cfg.layers);
  const double H = static_cast<double>(cfg.heads);
  const bool weights = keeps_weights(cfg, T);
  const double extra_threads = std::max(0, threads - 1);

  const double process = kProcessBytes + kProcessBytesPerThread * extra_threads;
  // each thread past the first trains a replica: its own parameters and gradients
  const double params = 4 * P * (2 + optimizer_copies) + 4 * P * 2 * extra_threads;
  // floats per position of a training step, and of an evaluation chunk (no graph: a few of a
  // block's tensors at once, the logits and their softmax)
  // (attention: the weights and their gradient when kept; else the output, each row's log-sum-exp
  // and the recomputing backward's dQ, dK, dV)
  const double per_layer = 10 * d + 2 * f + (weights ? 2 * H * T : H + 4 * d) + (cfg.dropout > 0 ? 3 * d : 0);
  const double step = 4 * N * (L * per_layer + 2 * d + 2.5 * V) * kAllocatorSlack;
  const double chunk_rows = std::min(static_cast<double>(std::max<std::int64_t>(eval_count, 1)),
                                     std::max(1.0, std::floor(static_cast<double>(kEvalChunkTokens) / T)));
  const double eval = 4 * chunk_rows * T * (4 * d + 2 * f + (weights ? H * T : H) + 2.5 * V) * kAllocatorSlack;
  const double picture = cfg.is_text() ? 0.0 : 4 * L * H * T * T * kAllocatorSlack;

  MemoryEstimate e;
  const double phase = std::max({step, eval, picture});
  e.bytes = process + params + corpus_bytes + phase;
  e.parts = fmt::format("the process {}, parameters and optimizer state {}, a training step {}, an evaluation "
                        "chunk {}",
                        byte_size(process), byte_size(params), byte_size(step), byte_size(eval));
  if (picture > 0) e.parts += fmt::format(", the attention picture {}", byte_size(picture));
  if (corpus_bytes > 0) e.parts += fmt::format(", the corpus {}", byte_size(corpus_bytes));

  // The advice names what would shrink the largest part.
  const std::string length = cfg.is_text() ? "--context" : "--max-len";
  const double vocab_share = 2.5 * V / (L * per_layer + 2 * d + 2.5 * V);
  if (params >= phase)
    e.advice = "use a smaller model (--d-model, --layers, --ffn)";
  else if (phase == picture)
    e.advice = fmt::format("use a smaller {} (the attention picture holds {} x {} weights per head and layer)", length,
                           cfg.sequence_length(), cfg.sequence_length());
  else if (phase == eval && chunk_rows > 1)
    e.advice = fmt::format("use a smaller --eval-count (it evaluates up to {} sequences at once) or {}",
                           static_cast<std::int64_t>(chunk_rows), length);
  else if (vocab_share > 0.5 && cfg.is_text() && cfg.tokenizer == "chars")
    e.advice = fmt::format("use --tokenizer bytes (256 tokens for this text's {} characters), a smaller --batch or {}",
                           cfg.vocab, length);
  else
    e.advice = fmt::format("use a smaller --batch or {}, or a smaller model", length);
  return e;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return physical_memory_bytes();
}

std::string byte_size(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  if (u == 0) return fmt::format("{:.0f} bytes", bytes);
  if (bytes >= 1e4) return fmt::format("{:.3g} {}", bytes, units[u]); // beyond EiB
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

void check_fits_in_memory(const MemoryEstimate& e, const RunConfig&, int ranks_here) {
  const double have = available_memory_bytes();
  const double need = e.bytes * std::max(1, ranks_here);
  if (have <= 0 || need <= have) return;
  throw std::invalid_argument(fmt::format(
      "this run needs about {} of memory{} ({}), more than the {} available on this machine (MemAvailable); {}",
      byte_size(need), ranks_here > 1 ? fmt::format(" for its {} ranks here", ranks_here) : std::string(""), e.parts,
      byte_size(have), e.advice));
}

} // namespace headgrad::train
