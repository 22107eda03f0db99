#include "train/run/memory_estimate.hpp"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <unistd.h>

#include "train/run/held_out.hpp"
#include "train/run/run_model.hpp"

namespace headgrad::train {

MemoryEstimate training_memory(const RunConfig& cfg, int ranks, double corpus_bytes) {
  const double P = static_cast<double>(parameter_count(cfg));
  const double optimizer_copies = cfg.optimizer == "sgd" ? (cfg.momentum > 0 ? 1 : 0) : 2; // momentum; Adam's m, v
  const double B = static_cast<double>(cfg.batch), T = static_cast<double>(cfg.sequence_length());
  const double N = B * T / std::max(1, ranks); // this rank's positions
  const double d = static_cast<double>(cfg.d_model), f = static_cast<double>(cfg.ffn);
  const double V = static_cast<double>(cfg.vocab), L = static_cast<double>(cfg.layers);
  const double params = 4 * P * (2 + optimizer_copies);
  const double batch = 16 * B * T;
  const double activations = 4 * N * (L * (6 * d + f) + 2 * V);
  const double eval = 4 * static_cast<double>(kEvalChunkTokens) * V;
  MemoryEstimate e;
  e.bytes = params + batch + activations + eval + corpus_bytes;
  e.parts = fmt::format("parameters and optimizer state {}, the batch {}, its activations {}, an evaluation chunk {}",
                        byte_size(params), byte_size(batch), byte_size(activations), byte_size(eval));
  if (corpus_bytes > 0) e.parts += fmt::format(", the corpus {}", byte_size(corpus_bytes));
  return e;
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

std::string byte_size(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  if (u == 0) return fmt::format("{:.0f} bytes", bytes);
  if (bytes >= 1e4) return fmt::format("{:.3g} {}", bytes, units[u]); // beyond EiB
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

void check_fits_in_memory(const MemoryEstimate& e, const RunConfig& cfg, int ranks_here) {
  const double have = physical_memory_bytes();
  const double need = e.bytes * std::max(1, ranks_here);
  if (have <= 0 || need <= have) return;
  throw std::invalid_argument(fmt::format(
      "this run needs at least {} of memory{} ({}), more than this machine's {} of physical memory; use a smaller "
      "--batch, {} or model",
      byte_size(need), ranks_here > 1 ? fmt::format(" for its {} ranks here", ranks_here) : std::string(""), e.parts,
      byte_size(have), cfg.is_text() ? "--context" : "--max-len"));
}

} // namespace headgrad::train
