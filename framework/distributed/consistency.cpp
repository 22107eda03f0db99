#include "framework/distributed/consistency.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <fmt/format.h>

#include "framework/distributed/communicator.hpp"

namespace headgrad::distributed {
namespace {

// Entries as "name\x1fvalue\x1e..." (unit and record separators: absent from names and values).
std::string encode(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string s;
  for (const auto& [name, value] : entries) s += name + '\x1f' + value + '\x1e';
  return s;
}

std::vector<std::pair<std::string, std::string>> decode(const std::string& s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t p = 0; p < s.size();) {
    const std::size_t unit = s.find('\x1f', p), record = s.find('\x1e', p);
    out.emplace_back(s.substr(p, unit - p), s.substr(unit + 1, record - unit - 1));
    p = record + 1;
  }
  return out;
}

} // namespace

void agree(const std::function<void()>& f) {
  if (size() == 1) return f(); // exceptions as they are
  std::string error;
  try {
    f();
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "(an error without a message)";
  }
  for (const std::string& e : allgather(error))
    if (!e.empty()) throw CollectiveError(e);
}

std::optional<Difference> first_difference(const std::vector<std::pair<std::string, std::string>>& named_values) {
  const std::vector<std::string> all = allgather(encode(named_values));
  const auto root = decode(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    const auto mine = decode(all[r]);
    for (std::size_t i = 0; i < std::max(root.size(), mine.size()); ++i) {
      const bool in_root = i < root.size(), in_mine = i < mine.size();
      if (in_root && in_mine && root[i] == mine[i]) continue;
      Difference d{in_root ? root[i].first : mine[i].first, static_cast<int>(r), "(missing)", "(missing)"};
      if (in_root) d.root_value = root[i].second;
      if (in_mine) d.value = mine[i].first == d.name ? mine[i].second : mine[i].first + " " + mine[i].second;
      return d;
    }
  }
  return std::nullopt;
}

std::uint64_t checksum(const Tensor& t) {
  const Tensor c = t.contiguous();
  const std::size_t bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype());
  const auto* p = static_cast<const unsigned char*>(c.raw());
  // FNV-1a over 8-byte words (then the tail bytes), with a final avalanche (splitmix64's).
  std::uint64_t h = 0xcbf29ce484222325ull;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 0x100000001b3ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::vector<std::pair<std::string, std::string>> checksums(const NamedTensors& tensors) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, fmt::format("{:016x}", checksum(t)));
  return out;
}

std::vector<std::pair<std::string, std::string>> descriptions(const NamedTensors& tensors) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    out.emplace_back(fmt::format("parameter {}", i), fmt::format("'{}' {} {}", name, t.shape(), dtype_name(t.dtype())));
  }
  return out;
}

} // namespace headgrad::distributed
