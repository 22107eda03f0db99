// tasks.cpp - task names, config validation, and batch generation (training and evaluation).
#include "data/tasks.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

#include "framework/core/random.hpp"

namespace headgrad::data {

Task parse_task(const std::string& name) {
  for (Task t : kAllTasks)
    if (name == task_name(t)) return t;
  throw std::invalid_argument(fmt::format("unknown task '{}' (valid: copy, reverse, sort, text, tokens)", name));
}

const char* task_name(Task task) {
  switch (task) {
  case Task::copy: return "copy";
  case Task::reverse: return "reverse";
  case Task::sort: return "sort";
  case Task::text: return "text";
  case Task::tokens: return "tokens";
  }
  return "?";
}

void validate(const TaskConfig& cfg) {
  if (cfg.task == Task::text || cfg.task == Task::tokens)
    throw std::invalid_argument("task: text has no generated sequences (its batches are windows of a corpus, data/text.hpp)");
  if (cfg.task != Task::copy && cfg.task != Task::reverse && cfg.task != Task::sort)
    throw std::invalid_argument(fmt::format("task: invalid value {}", static_cast<int>(cfg.task)));
  if (cfg.vocab < 2)
    throw std::invalid_argument(fmt::format("vocab must be at least 2 (token 0 is padding), got {}", cfg.vocab));
  if (cfg.min_len < 1)
    throw std::invalid_argument(fmt::format("min_len must be at least 1, got {}", cfg.min_len));
  if (cfg.min_len > cfg.max_len)
    throw std::invalid_argument(
        fmt::format("min_len ({}) must not exceed max_len ({})", cfg.min_len, cfg.max_len));
  if (cfg.max_len > kMaxSeqLen)
    throw std::invalid_argument(fmt::format("max_len must be at most {}, got {}", kMaxSeqLen, cfg.max_len));
  if (const std::int64_t space = task_space_size(cfg); space < kMinSplitSpace)
    throw std::invalid_argument(
        fmt::format("vocab {} with lengths {}..{} gives {} distinct sequences, too few to split into training and "
                    "held-out sequences (at least {}: raise vocab or max_len)",
                    cfg.vocab, cfg.min_len, cfg.max_len, space, kMinSplitSpace));
}

std::int64_t task_space_size(const TaskConfig& cfg) {
  constexpr std::int64_t kCap = std::int64_t{1} << 62;
  const std::int64_t symbols = cfg.vocab - 1;
  std::int64_t total = 0, count = 1; // count = symbols^len, saturated
  for (std::int64_t len = 1; len <= cfg.max_len && total < kCap; ++len) {
    count = count > kCap / symbols ? kCap : count * symbols;
    if (len >= cfg.min_len) total = std::min(kCap, total + count);
  }
  return total;
}

bool held_out_side(const std::int64_t* tokens, std::int64_t len) {
  // splitmix64's finaliser over the length and each token in turn: every token moves every bit.
  auto mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::uint64_t h = mix(0x5EED'0F'5EA5'0B1Dull ^ static_cast<std::uint64_t>(len));
  for (std::int64_t i = 0; i < len; ++i) h = mix(h + 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(tokens[i]));
  return h % kHeldOutShare == 0;
}

namespace {

// A row is drawn again when it lands on the wrong side of the split; validate() refuses the
// spaces where a side could be empty, so this many draws in a row on the wrong side (a chance
// of (15/16)^4096, about 1e-115, in a space that is split) means a broken hash, not bad luck.
constexpr int kMaxDrawsPerRow = 4096;

// Fills `rows` consecutive rows of the (rows, T) buffers from `gen` and returns the sum of the
// lengths. Per row the draws are: the length, then the tokens in order - a fixed order, so a row
// is a pure function of the generator state - repeated until the source is on the side of the
// split asked for (held_out). No allocation: everything is written in place, and sort/reverse
// work on the target row itself.
std::int64_t fill_rows(const TaskConfig& cfg, Generator& gen, std::int64_t rows, bool held_out, std::int64_t* tokens,
                       std::int64_t* targets, std::int64_t* lens) {
  const std::int64_t T = cfg.max_len;
  const auto span = static_cast<std::uint64_t>(cfg.max_len - cfg.min_len + 1);
  const auto symbols = static_cast<std::uint64_t>(cfg.vocab - 1); // 1..vocab-1
  std::int64_t total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t* src = tokens + r * T; // (T) source row
    std::int64_t* dst = targets + r * T; // (T) target row
    std::int64_t len = 0;
    for (int draw = 0;; ++draw) {
      if (draw == kMaxDrawsPerRow)
        throw std::logic_error(fmt::format("data: {} draws found no {} sequence of vocab {}, lengths {}..{}", draw,
                                           held_out ? "held-out" : "training", cfg.vocab, cfg.min_len, cfg.max_len));
      len = cfg.min_len + static_cast<std::int64_t>(gen.below(span));
      for (std::int64_t i = 0; i < len; ++i) src[i] = 1 + static_cast<std::int64_t>(gen.below(symbols));
      if (held_out_side(src, len) == held_out) break;
    }
    std::fill(src + len, src + T, std::int64_t{0});
    switch (cfg.task) {
    case Task::copy: std::copy(src, src + len, dst); break;
    case Task::reverse: std::reverse_copy(src, src + len, dst); break;
    case Task::sort:
      std::copy(src, src + len, dst);
      std::sort(dst, dst + len);
      break;
    case Task::text:
    case Task::tokens: break; // refused by validate()
    }
    std::fill(dst + len, dst + T, std::int64_t{0});
    lens[r] = len;
    total += len;
  }
  return total;
}

Batch generate(const TaskConfig& cfg, Generator& gen, std::int64_t rows, bool held_out) {
  Batch b;
  b.tokens = new_tensor({rows, cfg.max_len}, DType::i64);
  b.targets = new_tensor({rows, cfg.max_len}, DType::i64);
  b.valid_lens = new_tensor({rows}, DType::i64);
  b.valid_tokens = fill_rows(cfg, gen, rows, held_out, b.tokens.data<std::int64_t>(), b.targets.data<std::int64_t>(),
                             b.valid_lens.data<std::int64_t>());
  return b;
}

} // namespace

Batch make_batch(const TaskConfig& cfg, std::uint64_t seed, std::uint64_t index, std::int64_t batch_size) {
  validate(cfg);
  if (batch_size < 1)
    throw std::invalid_argument(fmt::format("make_batch: batch_size must be at least 1, got {}", batch_size));
  Generator gen(mix_seed(seed, index));
  return generate(cfg, gen, batch_size, /*held_out=*/false);
}

Batch make_eval_set(const TaskConfig& cfg, std::int64_t count) {
  validate(cfg);
  if (count < 1)
    throw std::invalid_argument(fmt::format("make_eval_set: count must be at least 1, got {}", count));
  // One generator for the whole set, rows drawn in order: a prefix of a bigger set is the smaller set.
  Generator gen(kEvalSeed);
  return generate(cfg, gen, count, /*held_out=*/true);
}

EvalSetReader::EvalSetReader(const TaskConfig& cfg, std::int64_t count) : cfg_(cfg), gen_(kEvalSeed), left_(count) {
  validate(cfg);
  if (count < 1)
    throw std::invalid_argument(fmt::format("make_eval_set: count must be at least 1, got {}", count));
}

Batch EvalSetReader::next(std::int64_t rows) {
  if (rows < 1) throw std::invalid_argument(fmt::format("EvalSetReader::next: rows must be at least 1, got {}", rows));
  if (left_ == 0) return {};
  const std::int64_t n = std::min(rows, left_);
  left_ -= n;
  return generate(cfg_, gen_, n, /*held_out=*/true);
}

Batch slice_batch(const Batch& b, std::int64_t start, std::int64_t count) {
  if (!b.tokens.defined() || !b.targets.defined() || !b.valid_lens.defined())
    throw std::invalid_argument("slice_batch: batch has undefined tensors");
  if (b.tokens.dim() != 2 || b.targets.shape() != b.tokens.shape() || b.valid_lens.dim() != 1 ||
      b.valid_lens.size(0) != b.tokens.size(0))
    throw std::invalid_argument(fmt::format("slice_batch: expected tokens/targets (B, T) and valid_lens (B), got {}, {}, {}",
                                            b.tokens.shape(), b.targets.shape(), b.valid_lens.shape()));
  const std::int64_t rows = b.tokens.size(0);
  if (start < 0 || start >= rows)
    throw std::invalid_argument(fmt::format("slice_batch: start {} is outside [0, {})", start, rows));
  if (count < 1) throw std::invalid_argument(fmt::format("slice_batch: count must be at least 1, got {}", count));
  const std::int64_t stop = std::min(rows, start + count);

  // Row views share the batch's storage: eval chunks cost no copy. make_view (not Tensor::slice)
  // because these are integer tensors outside any graph.
  auto rows_of = [&](const Tensor& t) {
    Dims shape = t.shape();
    shape[0] = stop - start;
    return make_view(t, shape, t.strides(), t.impl()->offset + start * t.strides()[0]);
  };
  Batch out;
  out.tokens = rows_of(b.tokens);
  out.targets = rows_of(b.targets);
  out.valid_lens = rows_of(b.valid_lens);
  for (std::int64_t v : out.valid_lens.to_int_vector()) out.valid_tokens += v;
  return out;
}

} // namespace headgrad::data
