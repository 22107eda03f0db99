#include "train/parallel/thread_replicas.hpp"

#include "framework/distributed/replica_parameters.hpp"
#include "framework/distributed/shard_gradients.hpp"
#include "framework/core/random.hpp"

namespace headgrad::train {

ThreadReplicas::ThreadReplicas(models::TokenModel& model, int threads, std::uint64_t seed) : model_(model) {
  for (int i = 1; i < threads; ++i) {
    auto r = model.replica(mix_seed(seed, static_cast<std::uint64_t>(i)));
    distributed::share_parameters(r->named_parameters(), model.named_parameters());
    replicas_.push_back(std::move(r));
  }
  pool_ = std::make_unique<runtime::SpinPool>(threads - 1);
  follow_mode();
}

void ThreadReplicas::follow_mode() {
  for (auto& r : replicas_) r->train(model_.training());
}

void ThreadReplicas::add_gradients_to_model() {
  std::vector<NamedTensors> lists;
  std::vector<distributed::ShardRange> blocks;
  for (int i = 0; i < count(); ++i) {
    lists.push_back(worker(i).named_parameters());
    blocks.push_back({i, i + 1});
  }
  distributed::ShardGradients sums(count(), lists);
  sums.begin(blocks);
  std::vector<Tensor> total = sums.sum_all();
  sums.end();
  for (std::size_t i = 0; i < total.size(); ++i) lists[0][i].second.impl()->grad = total[i].impl_ptr();
}

std::unique_ptr<ThreadReplicas> workers_for(models::TokenModel& model, int threads, std::uint64_t seed) {
  if (threads <= 1) return nullptr;
  return std::make_unique<ThreadReplicas>(model, threads, seed);
}

} // namespace headgrad::train
