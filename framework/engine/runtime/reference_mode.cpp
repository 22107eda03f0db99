// reference_mode.cpp - the switch between the engine and the book's own loops (kernels.hpp).
#include <cstdlib>
#include <cstring>

#include "framework/engine/kernels.hpp"

namespace headgrad::runtime::detail {

bool reference_from_environment() {
  const char* v = std::getenv("HEADGRAD_REFERENCE");
  return v && *v && std::strcmp(v, "0") != 0;
}

} // namespace headgrad::runtime::detail
