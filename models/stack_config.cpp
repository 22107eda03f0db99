#include "models/stack_config.hpp"

#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::models {

void validate_stack(const StackConfig& c, const StackFieldNames& names) {
  auto positive = [](std::int64_t v, const char* name) {
    if (v <= 0) throw std::invalid_argument(fmt::format("{} must be positive, got {}", name, v));
  };
  positive(c.vocab, names.vocab);
  positive(c.d_model, names.d_model);
  positive(c.heads, names.heads);
  positive(c.layers, names.layers);
  positive(c.ffn, names.ffn);
  if (c.d_model % c.heads != 0)
    throw std::invalid_argument(
        fmt::format("{} ({}) must be divisible by {} ({})", names.d_model, c.d_model, names.heads, c.heads));
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    throw std::invalid_argument(fmt::format("{} must be in [0, 1), got {}", names.dropout, c.dropout));
}

} // namespace headgrad::models
