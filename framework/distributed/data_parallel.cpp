#include "framework/distributed/data_parallel.hpp"

#include <cstring>
#include <fmt/format.h>
#include <stdexcept>
#include <vector>

#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"

namespace headgrad::distributed {
namespace {

// The module's parameters, after checking that every rank's list is rank 0's (a collective).
NamedTensors same_parameters_on_every_rank(const nn::Module& module, const char* who) {
  NamedTensors params = module.named_parameters();
  if (const auto d = first_difference(descriptions(params)))
    throw std::invalid_argument(fmt::format("{}: the ranks' modules differ: {} is {} on rank {} but {} on rank 0", who,
                                            d->name, d->value, d->rank, d->root_value));
  return params;
}

NamedTensors parameters_from_rank_0(nn::Module& module) {
  broadcast_parameters(module);
  return module.named_parameters();
}

} // namespace

DataParallel::DataParallel(nn::Module& module, std::size_t bucket_bytes)
    : reducer_(parameters_from_rank_0(module), {module.named_parameters()}, bucket_bytes) {}

void DataParallel::backward(const Tensor& loss) {
  reducer_.begin(1);
  loss.backward();
  reducer_.finish();
}

void DataParallel::backward_without_data() {
  reducer_.begin(0);
  reducer_.finish();
}

void broadcast_parameters(nn::Module& module) {
  for (auto& [name, p] : same_parameters_on_every_rank(module, "broadcast_parameters")) {
    if (!p.is_contiguous()) throw std::invalid_argument(fmt::format("broadcast_parameters: '{}' is not contiguous", name));
    broadcast(p.raw(), static_cast<std::size_t>(p.numel()) * dtype_size(p.dtype()));
  }
}

void allreduce_gradients(nn::Module& module) {
  NamedTensors params = same_parameters_on_every_rank(module, "allreduce_gradients");
  // how many ranks have each gradient (counts: exact in any order)
  std::vector<double> reached(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) reached[i] = params[i].second.grad().defined() ? 1 : 0;
  allreduce_sum(reached.data(), static_cast<std::int64_t>(reached.size()));
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor& p = params[i].second;
    if (reached[i] == 0) continue; // no rank's backward reached it: it stays without a gradient
    if (!p.grad().defined()) {
      Tensor zeros = Tensor::zeros(p.shape(), p.dtype());
      p.impl()->grad = zeros.impl_ptr();
    }
    const Tensor g = p.grad().is_contiguous() ? p.grad() : p.grad().contiguous();
    p.impl()->grad = g.impl_ptr();
    dispatch_float(g.dtype(), "allreduce_gradients", [&]<typename T>() { allreduce_sum(g.data<T>(), g.numel()); });
  }
}

} // namespace headgrad::distributed
