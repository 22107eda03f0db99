// tasks.hpp - the toy sequence tasks (copy, reverse, sort), their batches, the held-out evaluation
// set, and the accuracy helpers the trainer reports.
//
// A sequence is `len` tokens drawn uniformly from 1..vocab-1, len uniform in [min_len, max_len],
// padded with 0 up to max_len. Targets are per position (the model is an encoder that reads the
// whole source and emits one token per position):
//   copy    -> the source itself
//   reverse -> the valid prefix reversed        (3 9 1 0 0 -> 1 9 3 0 0)
//   sort    -> the valid prefix sorted ascending (3 9 1 0 0 -> 1 3 9 0 0)
// Padding positions have token 0 and target 0 and carry no loss: `valid_lens` says which count,
// exactly the d2l `masked_softmax(X, valid_lens)` convention the attention code uses.
//
// Reproducibility: batch `index` of a run is a pure function of (config, seed, index), so a run
// resumed from a checkpoint at step k sees the same batches k, k+1, ... as the uninterrupted run,
// without replaying 0..k-1. The evaluation set has its own fixed seed (kEvalSeed) and is never
// drawn from the training stream.
//
// The held-out split: a hash of a sequence (its length and source tokens, held_out_side()) puts
// about 1 in 16 of all sequences on the held-out side. Training rows are drawn only from the other
// side (a row that lands on the held-out side is drawn again from the same generator) and the
// evaluation set only from the held-out side, so no evaluation sequence is ever trained on,
// however small the task space (15^4 = 50625 length-4 sequences exist at vocab 16: without the
// split, a long run sees most of them). A space of fewer than kMinSplitSpace sequences is refused.
//
// Generation uses only headgrad::Generator (xoshiro256**, integer draws by rejection), so the
// batches are bit-identical on every machine and compiler.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "framework/core/random.hpp"
#include "framework/core/tensor.hpp"

namespace headgrad::data {

// The toy tasks, and `text`: a causal language model on a text corpus, whose batches are windows
// of that text (data/text.hpp), not generated here.
// text: a corpus tokenized here (data/text.hpp); tokens: token files prepared elsewhere (data/token_files.hpp)
enum class Task : std::uint8_t { copy, reverse, sort, text, tokens };
inline constexpr std::array<Task, 5> kAllTasks = {Task::copy, Task::reverse, Task::sort, Task::text, Task::tokens};

// "copy" | "reverse" | "sort" | "text"; anything else throws std::invalid_argument listing those names.
Task parse_task(const std::string& name);
const char* task_name(Task task);

// Longest sequence we agree to generate: far beyond what a toy model trains on, small enough that
// a typo (max_len=100000) fails at startup instead of allocating (B, 100000) tensors.
inline constexpr std::int64_t kMaxSeqLen = 4096;

struct TaskConfig {
  Task task = Task::sort;
  std::int64_t vocab = 16;   // token ids 0..vocab-1; 0 is padding, so sources use 1..vocab-1
  std::int64_t min_len = 4;  // valid length is uniform in [min_len, max_len]
  std::int64_t max_len = 16; // = T, the padded length of every batch
};

// Throws std::invalid_argument with one line naming the bad field(s) and value(s); also for
// Task::text, which has no generated sequences, and for a task space too small to split
// (task_space_size < kMinSplitSpace).
void validate(const TaskConfig& cfg);

// The held-out split (see the top of this file). 1 in kHeldOutShare sequences is held out; the
// smallest task space split is kMinSplitSpace sequences (about 60 of them held out).
inline constexpr std::uint64_t kHeldOutShare = 16;
inline constexpr std::int64_t kMinSplitSpace = 1000;

// How many distinct sources cfg can generate: sum over len in [min_len, max_len] of (vocab-1)^len,
// saturated at 2^62. Needs only vocab >= 2 and 1 <= min_len <= max_len.
std::int64_t task_space_size(const TaskConfig& cfg);

// Whether the source `tokens[0..len)` is on the held-out side of the split: a pure function of
// the tokens (a 64-bit hash), the same for every task, seed and machine.
bool held_out_side(const std::int64_t* tokens, std::int64_t len);

struct Batch {
  Tensor tokens;            // (B, T) int64, source tokens, 0 after valid_lens[b]
  Tensor targets;           // (B, T) int64, per-position targets, 0 after valid_lens[b]
  Tensor valid_lens;        // (B) int64, in [min_len, max_len]
  std::int64_t valid_tokens = 0; // sum of valid_lens: the divisor of a mean per-token loss
};

// Training batch `index` of the run seeded `seed`: B = batch_size rows, T = cfg.max_len.
// Drawn from Generator(mix_seed(seed, index)) only, so it depends on nothing but its arguments.
Batch make_batch(const TaskConfig& cfg, std::uint64_t seed, std::uint64_t index, std::int64_t batch_size);

// The evaluation seed. Training streams are seeded with mix_seed(seed, index) - a splitmix64
// output - while the evaluation set seeds its Generator with this constant directly, so the two
// can only meet by a 2^-64 accident. Changing it changes every reported eval number: don't.
inline constexpr std::uint64_t kEvalSeed = 0xE7A1'5E7D'0C0F'FEE5ull;

// The held-out set: `count` rows generated in order from Generator(kEvalSeed). Identical across
// calls and runs for the same cfg; the first n rows of a larger set equal a set of size n.
Batch make_eval_set(const TaskConfig& cfg, std::int64_t count = 1000);

// The held-out set a chunk at a time, without holding it whole: next(n) gives the following
// min(n, rows left) rows of make_eval_set(cfg, count) - the same rows, the set being drawn in
// order from one generator - and a Batch with undefined tensors once all `count` were given.
class EvalSetReader {
public:
  EvalSetReader(const TaskConfig& cfg, std::int64_t count); // validates as make_eval_set
  Batch next(std::int64_t rows);

private:
  TaskConfig cfg_;
  Generator gen_;
  std::int64_t left_;
};

// Rows [start, start + count) of `b` as views (no copy), with valid_tokens recomputed. `count` is
// clipped at the end of the batch, like a Python slice, so a loop
//   for (s = 0; s < n; s += chunk) use(slice_batch(eval, s, chunk));
// gets a short last chunk. Throws if start is outside [0, B) or count < 1.
Batch slice_batch(const Batch& b, std::int64_t start, std::int64_t count);

// ---- scoring -----------------------------------------------------------------------------------
struct Accuracy {
  double token_acc = 0;        // correct valid positions / valid positions (0 when there are none)
  double seq_acc = 0;          // sequences with every valid position correct / sequences
  std::int64_t tokens = 0;     // valid positions scored
  std::int64_t sequences = 0;  // rows scored
  std::int64_t correct_tokens = 0;
  std::int64_t correct_sequences = 0;

  // Merges another chunk's counts (e.g. slices of the eval set) and recomputes both rates, so
  // the result equals scoring everything at once - averaging the rates would weight chunks wrongly.
  Accuracy& operator+=(const Accuracy& other);
};

// `predictions` (B, T) int64, e.g. argmax_last(logits). Only positions t < valid_lens[b] count;
// a sequence is correct when all its valid positions are (vacuously so for valid_len 0).
Accuracy score(const Tensor& predictions, const Batch& b);

// Index of the largest entry along the last axis: float (..., V) -> int64 (...). Ties go to the
// first index (torch.argmax). No autograd: predictions are not differentiable.
Tensor argmax_last(const Tensor& logits);

// "3 9 1 4": the first `len` tokens of row `row` of a 2-D int64 tensor, for printing examples.
std::string format_sequence(const Tensor& tokens, std::int64_t row, std::int64_t len);

} // namespace headgrad::data
