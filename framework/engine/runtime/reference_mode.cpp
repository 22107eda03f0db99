// reference_mode.cpp - the switch between the engine and the book's own loops (kernels.hpp).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "framework/engine/kernels.hpp"

namespace headgrad::runtime {
namespace {

// HEADGRAD_REFERENCE=1 (or any value but "0" and "") turns reference mode on from the start.
bool reference_from_environment() {
  const char* v = std::getenv("HEADGRAD_REFERENCE");
  return v && *v && std::strcmp(v, "0") != 0;
}

// Read at first use, so that a static initialiser asking early sees the environment's answer too.
std::atomic<bool>& flag() {
  static std::atomic<bool> on{reference_from_environment()};
  return on;
}

} // namespace

bool reference() { return flag().load(std::memory_order_relaxed); }
void set_reference(bool on) { flag().store(on, std::memory_order_relaxed); }

} // namespace headgrad::runtime
