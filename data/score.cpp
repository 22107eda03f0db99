// score.cpp - accuracy over valid positions, argmax over logits, and printing a sequence.
#include <fmt/format.h>
#include <stdexcept>

#include "data/tasks.hpp"

namespace headgrad::data {
namespace {

double rate(std::int64_t correct, std::int64_t total) {
  return total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total);
}

void require_i64(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) throw std::invalid_argument(fmt::format("{}: {} is undefined", op, what));
  if (t.dtype() != DType::i64)
    throw std::invalid_argument(fmt::format("{}: {} must be int64, got {}", op, what, dtype_name(t.dtype())));
}

} // namespace

Accuracy& Accuracy::operator+=(const Accuracy& o) {
  tokens += o.tokens;
  sequences += o.sequences;
  correct_tokens += o.correct_tokens;
  correct_sequences += o.correct_sequences;
  token_acc = rate(correct_tokens, tokens);
  seq_acc = rate(correct_sequences, sequences);
  return *this;
}

Accuracy score(const Tensor& predictions, const Batch& b) {
  require_i64(predictions, "score", "predictions");
  require_i64(b.targets, "score", "targets");
  require_i64(b.valid_lens, "score", "valid_lens");
  if (b.targets.dim() != 2 || predictions.shape() != b.targets.shape() || b.valid_lens.dim() != 1 ||
      b.valid_lens.size(0) != b.targets.size(0))
    throw std::invalid_argument(fmt::format(
        "score: expected predictions and targets (B, T) and valid_lens (B), got {}, {}, {}",
        predictions.shape(), b.targets.shape(), b.valid_lens.shape()));
  const std::int64_t B = b.targets.size(0), T = b.targets.size(1);
  // Strided reads: predictions may be a view (a transpose, a slice) and need no copy.
  const std::int64_t* pred = predictions.data<std::int64_t>();
  const std::int64_t* tgt = b.targets.data<std::int64_t>();
  const std::int64_t* lens = b.valid_lens.data<std::int64_t>();
  const Dims& ps = predictions.strides();
  const Dims& ts = b.targets.strides();
  const std::int64_t ls = b.valid_lens.strides()[0];

  Accuracy acc;
  for (std::int64_t r = 0; r < B; ++r) {
    const std::int64_t len = lens[r * ls];
    if (len < 0 || len > T)
      throw std::invalid_argument(fmt::format("score: valid_lens[{}] = {} is outside [0, {}]", r, len, T));
    std::int64_t right = 0;
    for (std::int64_t t = 0; t < len; ++t) right += pred[r * ps[0] + t * ps[1]] == tgt[r * ts[0] + t * ts[1]];
    acc.tokens += len;
    acc.correct_tokens += right;
    acc.correct_sequences += right == len;
  }
  acc.sequences = B;
  acc.token_acc = rate(acc.correct_tokens, acc.tokens);
  acc.seq_acc = rate(acc.correct_sequences, acc.sequences);
  return acc;
}

Tensor argmax_last(const Tensor& logits) {
  if (!logits.defined() || logits.dim() < 1)
    throw std::invalid_argument("argmax_last: expected a tensor of rank >= 1");
  const std::int64_t V = logits.shape().back();
  if (V < 1) throw std::invalid_argument(fmt::format("argmax_last: last axis is empty in shape {}", logits.shape()));
  Dims out_shape = logits.shape();
  out_shape.pop_back();
  Tensor out = new_tensor(out_shape, DType::i64);
  // detach(): a contiguous copy of a graph tensor must not record a node.
  const Tensor x = logits.detach().contiguous();
  std::int64_t* o = out.data<std::int64_t>();
  const std::int64_t rows = out.numel();
  dispatch_float(x.dtype(), "argmax_last", [&]<typename T>() {
    const T* p = x.data<T>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = p + r * V; // (V) logits of one position
      std::int64_t best = 0;
      for (std::int64_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v; // strict: ties keep the first index
      o[r] = best;
    }
  });
  return out;
}

std::string format_sequence(const Tensor& tokens, std::int64_t row, std::int64_t len) {
  require_i64(tokens, "format_sequence", "tokens");
  if (tokens.dim() != 2)
    throw std::invalid_argument(fmt::format("format_sequence: expected a 2-D tensor, got shape {}", tokens.shape()));
  if (row < 0 || row >= tokens.size(0))
    throw std::invalid_argument(fmt::format("format_sequence: row {} is outside [0, {})", row, tokens.size(0)));
  if (len < 0 || len > tokens.size(1))
    throw std::invalid_argument(fmt::format("format_sequence: len {} is outside [0, {}]", len, tokens.size(1)));
  const std::int64_t* p = tokens.data<std::int64_t>() + row * tokens.strides()[0];
  const std::int64_t step = tokens.strides()[1];
  std::string out;
  for (std::int64_t i = 0; i < len; ++i) {
    if (i) out += ' ';
    out += fmt::format("{}", p[i * step]);
  }
  return out;
}

} // namespace headgrad::data
