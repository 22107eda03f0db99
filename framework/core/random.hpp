// random.hpp - a seeded generator whose streams are the same on every machine and compiler
// (std::normal_distribution is implementation-defined, so we do not use it).
#pragma once
#include <array>
#include <cstdint>

namespace headgrad {

// Everything a Generator's future draws depend on: the xoshiro256** words and Box-Muller's
// cached second value. set_state(state()) continues the stream exactly (checkpoints keep it, as
// torch.Generator.get_state / set_state do).
struct GeneratorState {
  std::array<std::uint64_t, 4> words{};
  bool has_spare = false;
  double spare = 0;
  bool operator==(const GeneratorState&) const = default;
};

class Generator {
public:
  explicit Generator(std::uint64_t seed = 0) { seed_state(seed); }
  void seed_state(std::uint64_t seed);
  GeneratorState state() const { return {{s_[0], s_[1], s_[2], s_[3]}, has_spare_, spare_}; }
  // Throws std::invalid_argument for the all-zero words (xoshiro's one state that never leaves 0).
  void set_state(const GeneratorState& state);
  std::uint64_t next_u64(); // xoshiro256**
  double uniform();         // [0, 1), 53 random bits
  double normal();          // N(0, 1), Box-Muller
  std::uint64_t below(std::uint64_t n); // uniform integer in [0, n), unbiased

private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

// A stream derived from (seed, index) - e.g. batch k of a run depends only on (seed, k).
std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t index);

} // namespace headgrad
