#include "train/fit/data_source.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::train {

const Tensor& Batch::operator[](std::string_view name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  std::string names;
  for (const auto& [n, t] : tensors) names += fmt::format("{}'{}'", names.empty() ? "" : ", ", n);
  throw std::invalid_argument(fmt::format("train::Batch: no tensor '{}' (the batch holds {})", name,
                                          names.empty() ? "none" : names));
}

std::int64_t Batch::rows() const {
  if (tensors.empty()) throw std::invalid_argument("train::Batch: the batch holds no tensors");
  std::int64_t rows = -1;
  for (const auto& [n, t] : tensors) {
    if (!t.defined() || t.dim() == 0)
      throw std::invalid_argument(fmt::format("train::Batch: tensor '{}' has no rows (it is {})", n,
                                              t.defined() ? "a scalar" : "undefined"));
    if (rows >= 0 && t.size(0) != rows)
      throw std::invalid_argument(fmt::format("train::Batch: tensor '{}' has {} rows, but '{}' has {} (shape {})", n,
                                              t.size(0), tensors[0].first, rows, t.shape()));
    rows = t.size(0);
  }
  return rows;
}

Batch Batch::slice(std::int64_t first, std::int64_t count) const {
  const std::int64_t n = rows();
  if (first < 0 || count < 1 || first + count > n)
    throw std::invalid_argument(fmt::format("train::Batch::slice: rows [{}, {}) of a batch of {}", first, first + count, n));
  Batch part;
  for (const auto& [name, t] : tensors) {
    Dims shape = t.shape();
    shape[0] = count;
    part.tensors.emplace_back(name, make_view(t, shape, t.strides(), t.impl()->offset + first * t.strides()[0]));
  }
  return part;
}

} // namespace headgrad::train
