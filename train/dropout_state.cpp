#include "train/dropout_state.hpp"

#include <bit>
#include <fmt/format.h>
#include <sstream>

#include "framework/distributed/communicator.hpp"
#include "framework/nn/layers.hpp"

namespace headgrad::train {
namespace {

constexpr const char* kPrefix = "rng.";

std::string entry_name(int rank, int worker, const std::string& module) {
  return fmt::format("{}rank{}.worker{}.{}", kPrefix, rank, worker, module);
}

// Calls fn(worker index, module name, its generator) for every dropout of this rank's workers.
template <typename Fn> void for_each_generator(models::TokenModel& model, ThreadReplicas* replicas, Fn&& fn) {
  const int workers = replicas ? replicas->count() : 1;
  for (int w = 0; w < workers; ++w) {
    models::TokenModel& m = replicas ? replicas->worker(w) : model;
    for (auto& [name, module] : m.named_modules())
      if (auto* d = dynamic_cast<nn::Dropout*>(module)) fn(w, name, d->gen);
  }
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

bool is_dropout_state(const std::string& name) { return name.rfind(kPrefix, 0) == 0; }

NamedTensors dropout_states(models::TokenModel& model, ThreadReplicas* replicas) {
  const int rank = distributed::rank();
  // one line per generator: "name w0 w1 w2 w3 has_spare spare_bits", so ranks can send them as text
  std::ostringstream mine;
  for_each_generator(model, replicas, [&](int w, const std::string& name, const Generator& g) {
    const GeneratorState s = g.state();
    mine << entry_name(rank, w, name);
    for (std::uint64_t x : s.words) mine << ' ' << x;
    mine << ' ' << (s.has_spare ? 1 : 0) << ' ' << std::bit_cast<std::uint64_t>(s.spare) << '\n';
  });
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

void restore_dropout_states(const NamedTensors& states, models::TokenModel& model, ThreadReplicas* replicas,
                            const std::string& source) {
  const int rank = distributed::rank();
  for_each_generator(model, replicas, [&](int w, const std::string& module, Generator& g) {
    const std::string name = entry_name(rank, w, module);
    for (const auto& [n, t] : states)
      if (n == name) g.set_state(from_tensor(t, source, n));
  });
}

} // namespace headgrad::train
