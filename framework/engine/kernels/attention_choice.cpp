// attention_choice.cpp - when attention keeps only O and each row's log-sum-exp (the flash kernels,
// attention_heads.hpp) instead of the weights P.
#include "framework/engine/kernels.hpp"

namespace headgrad::kernels {
namespace {
// From this many scores per head (Tq x Tk) on, the flash kernels replace keeping P: measured by
// `headgrad_bench --attention-sweep` (causal, forward + backward, float32, 1 and 2 threads): with
// head size 64 flash is 0.85-0.90x keep-P's time from T = 256 on and 1.0-1.2x below; with head
// size 16 it is 1.05-1.15x at T = 256 and 0.8-0.95x from T = 384-512 on (the recomputed scores
// cost relatively more when each score is a shorter dot product).
constexpr std::int64_t kFlashMinScores = 256 * 256, kFlashMinScoresSmallHeads = 384 * 384;
} // namespace

bool flash_attention_pays(std::int64_t Tq, std::int64_t Tk, std::int64_t dh) {
  // (reference mode: the book's attention loop keeps P, whatever the length)
  return !runtime::reference() && Tq * Tk >= (dh >= 32 ? kFlashMinScores : kFlashMinScoresSmallHeads);
}

} // namespace headgrad::kernels
