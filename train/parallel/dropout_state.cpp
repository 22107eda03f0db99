#include "train/parallel/dropout_state.hpp"

#include <bit>
#include <fmt/format.h>
#include <sstream>

#include "framework/distributed/communicator.hpp"
#include "framework/nn/layers.hpp"
#include "train/run/checkpoint.hpp"

namespace headgrad::train {
namespace {

constexpr const char* kPrefix = kDropoutStatePrefix; // (train/run/checkpoint.hpp)

std::string entry_name(std::int64_t shard, const std::string& module) {
  return fmt::format("{}shard{}.{}", kPrefix, shard, module);
}
// the name a single process's worker `shard` had before runs were cut into shards
std::string old_entry_name(std::int64_t shard, const std::string& module) {
  return fmt::format("{}rank0.worker{}.{}", kPrefix, shard, module);
}

// Calls fn(module index, name, its generator) for every dropout module of `model`, in module order.
template <typename Fn> void for_each_dropout(nn::Module& model, Fn&& fn) {
  int j = 0;
  for (auto& [name, module] : model.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(module)) fn(j++, name, d->gen);
}

Tensor to_tensor(const GeneratorState& s) {
  std::vector<std::int64_t> v;
  for (std::uint64_t w : s.words) v.push_back(std::bit_cast<std::int64_t>(w));
  v.push_back(s.has_spare ? 1 : 0);
  v.push_back(std::bit_cast<std::int64_t>(s.spare));
  return Tensor::from_ints(v, {6});
}

GeneratorState from_tensor(const Tensor& t, const std::string& source, const std::string& name) {
  if (t.dtype() != DType::i64 || t.shape() != Dims{6})
    throw std::invalid_argument(fmt::format("{}: dropout state '{}' must be int64 (6), got {} {}", source, name,
                                            dtype_name(t.dtype()), t.shape()));
  const auto v = t.to_int_vector();
  GeneratorState s;
  for (std::size_t i = 0; i < 4; ++i) s.words[i] = std::bit_cast<std::uint64_t>(v[i]);
  s.has_spare = v[4] != 0;
  s.spare = std::bit_cast<double>(v[5]);
  if (s.words == std::array<std::uint64_t, 4>{})
    throw std::invalid_argument(fmt::format("{}: dropout state '{}' is all zeros", source, name));
  return s;
}

} // namespace

ShardDropout::ShardDropout(models::TokenModel& model, std::uint64_t seed, std::int64_t shards,
                           distributed::ShardRange mine)
    : shards_(shards), mine_(mine) {
  std::vector<GeneratorState> first;
  for_each_dropout(model, [&](int, const std::string& name, const Generator& g) {
    modules_.push_back(name);
    first.push_back(g.state());
  });
  for (std::int64_t s = mine.first; s < mine.end; ++s) {
    if (s == 0 || modules_.empty()) {
      gens_.push_back(first);
      continue;
    }
    // as a replica of a single process's worker s draws (ThreadReplicas seeds it so)
    const auto replica = model.replica(mix_seed(seed, static_cast<std::uint64_t>(s)));
    std::vector<GeneratorState> own;
    for_each_dropout(*replica, [&](int, const std::string&, const Generator& g) { own.push_back(g.state()); });
    gens_.push_back(std::move(own));
  }
}

void ShardDropout::load(nn::Module& worker, std::int64_t shard) const {
  const auto& g = gens_.at(static_cast<std::size_t>(shard - mine_.first));
  for_each_dropout(worker, [&](int j, const std::string&, Generator& gen) { gen.set_state(g[static_cast<std::size_t>(j)]); });
}

void ShardDropout::store(nn::Module& worker, std::int64_t shard) {
  auto& g = gens_.at(static_cast<std::size_t>(shard - mine_.first));
  for_each_dropout(worker, [&](int j, const std::string&, const Generator& gen) { g[static_cast<std::size_t>(j)] = gen.state(); });
}

ShardDropout ShardDropout::seeded_per_module(nn::Module& model, std::uint64_t seed, std::int64_t shards,
                                             distributed::ShardRange mine) {
  ShardDropout d;
  d.shards_ = shards;
  d.mine_ = mine;
  for_each_dropout(model, [&](int, const std::string& name, const Generator&) { d.modules_.push_back(name); });
  for (std::int64_t s = mine.first; s < mine.end; ++s) {
    std::vector<GeneratorState> own;
    for (std::size_t j = 0; j < d.modules_.size(); ++j)
      own.push_back(Generator(mix_seed(mix_seed(seed, static_cast<std::uint64_t>(s)), j)).state());
    d.gens_.push_back(std::move(own));
  }
  return d;
}

NamedTensors ShardDropout::states() const {
  // one line per generator: "name w0 w1 w2 w3 has_spare spare_bits", so ranks can send them as text
  std::ostringstream mine;
  for (std::int64_t s = mine_.first; s < mine_.end; ++s)
    for (std::size_t j = 0; j < modules_.size(); ++j) {
      const GeneratorState& st = gens_[static_cast<std::size_t>(s - mine_.first)][j];
      mine << entry_name(s, modules_[j]);
      for (std::uint64_t x : st.words) mine << ' ' << x;
      mine << ' ' << (st.has_spare ? 1 : 0) << ' ' << std::bit_cast<std::uint64_t>(st.spare) << '\n';
    }
  const std::vector<std::string> all =
      distributed::size() > 1 ? distributed::allgather(mine.str()) : std::vector<std::string>{mine.str()};
  NamedTensors out;
  for (const std::string& text : all) {
    std::istringstream in(text);
    std::string name;
    GeneratorState s;
    int has_spare = 0;
    std::uint64_t spare_bits = 0;
    while (in >> name >> s.words[0] >> s.words[1] >> s.words[2] >> s.words[3] >> has_spare >> spare_bits) {
      s.has_spare = has_spare != 0;
      s.spare = std::bit_cast<double>(spare_bits);
      out.emplace_back(name, to_tensor(s));
    }
  }
  return out;
}

void ShardDropout::restore(const NamedTensors& states, const std::string& source) {
  for (std::int64_t s = mine_.first; s < mine_.end; ++s)
    for (std::size_t j = 0; j < modules_.size(); ++j) {
      const std::string name = entry_name(s, modules_[j]), old = old_entry_name(s, modules_[j]);
      for (const auto& [n, t] : states)
        if (n == name || n == old) gens_[static_cast<std::size_t>(s - mine_.first)][j] = from_tensor(t, source, n);
    }
}

} // namespace headgrad::train
