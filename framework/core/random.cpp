#include "framework/core/random.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace headgrad {
namespace {
std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
} // namespace

void Generator::seed_state(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
  has_spare_ = false;
}

void Generator::set_state(const GeneratorState& state) {
  if (state.words == std::array<std::uint64_t, 4>{})
    throw std::invalid_argument("Generator::set_state: the all-zero state is not a state of the generator");
  for (std::size_t i = 0; i < 4; ++i) s_[i] = state.words[i];
  has_spare_ = state.has_spare;
  spare_ = state.spare;
}

std::uint64_t Generator::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

std::uint64_t Generator::below(std::uint64_t n) {
  if (n == 0) throw std::invalid_argument("Generator::below: the range [0, 0) is empty");
  // Rejection sampling removes modulo bias.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % n;
}

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t index) {
  // Hash the seed before mixing in the index, so (seed, index) pairs cannot cancel each other
  // out (seed ^ index * C alone maps (0, 1) and (C, 0) to the same stream).
  std::uint64_t s = seed;
  std::uint64_t x = splitmix64(s) ^ (index * 0xD1B54A32D192ED03ull);
  return splitmix64(x);
}

} // namespace headgrad
