// The main() of every test program: headgrad's start-up path first (the BLAS kernel and OpenMP
// wait policy the headgrad command runs with, so results a test compares with the command's were
// computed by the same kernel), then doctest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "framework/engine/runtime/startup.hpp"

int main(int argc, char** argv) {
  headgrad::runtime::configure(argc, argv);
  doctest::Context context(argc, argv);
  return context.run();
}
