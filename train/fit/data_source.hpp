// data_source.hpp - what the Trainer (train/fit/trainer.hpp) trains on: batch i of a reproducible
// stream. A resumed run asks for the batches the interrupted one had not reached, so a source
// whose batch i depends on i alone (and on its own fixed configuration: a seed, a file) makes the
// resumed run's batches the uninterrupted run's.
#pragma once
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "framework/core/tensor.hpp"

namespace headgrad::train {

// One batch: named tensors whose first axis is the batch's rows (its examples), e.g. {"x", (B, 8)},
// {"y", (B)}. The Trainer cuts a batch into shards along that axis (Batch::slice), so every tensor
// must have the same number of rows.
struct Batch {
  NamedTensors tensors;

  Batch() = default;
  Batch(std::initializer_list<std::pair<std::string, Tensor>> named) : tensors(named) {}

  // The tensor called `name`; std::invalid_argument naming it and the batch's names if none is.
  const Tensor& operator[](std::string_view name) const;
  // The rows: every tensor's first axis (std::invalid_argument if the batch is empty, a tensor is a
  // scalar or they differ).
  std::int64_t rows() const;
  // Rows [first, first + count) of every tensor, as views of the batch's storage (no copy).
  Batch slice(std::int64_t first, std::int64_t count) const;
};

// A data source: `source.batch(i)` is batch i (i = 0, 1, ...; step s trains on batch s - 1), the
// same batch every time it is asked for. E.g.
//   struct Pairs { Batch batch(std::uint64_t i) const { Generator g(mix_seed(7, i)); ... } };
template <typename S>
concept DataSource = requires(S& source, std::uint64_t index) {
  { source.batch(index) } -> std::convertible_to<Batch>;
};

} // namespace headgrad::train
