#include "train/parallel/thread_replicas.hpp"

#include "framework/distributed/replica_parameters.hpp"
#include "framework/distributed/shard_gradients.hpp"
#include "framework/core/random.hpp"

namespace headgrad::train {

ThreadReplicas::ThreadReplicas(models::TokenModel& model, int threads, std::uint64_t seed)
    : model_(model), token_models_(true) {
  for (int i = 1; i < threads; ++i) replicas_.push_back(model.replica(mix_seed(seed, static_cast<std::uint64_t>(i))));
  share_and_start(threads);
}

ThreadReplicas::ThreadReplicas(nn::Module& model, int threads,
                               const std::function<std::unique_ptr<nn::Module>(int)>& make_replica)
    : model_(model) {
  for (int i = 1; i < threads; ++i) replicas_.push_back(make_replica(i));
  share_and_start(threads);
}

void ThreadReplicas::share_and_start(int threads) {
  for (auto& r : replicas_) distributed::share_parameters(r->named_parameters(), model_.named_parameters());
  pool_ = std::make_unique<runtime::SpinPool>(threads - 1);
  follow_mode();
}

models::TokenModel& ThreadReplicas::worker(int i) {
  if (!token_models_) throw std::logic_error("ThreadReplicas::worker: the replicas are not TokenModels (use module(i))");
  return static_cast<models::TokenModel&>(module(i));
}

void ThreadReplicas::follow_mode() {
  for (auto& r : replicas_) r->train(model_.training());
}

void ThreadReplicas::add_gradients_to_model() {
  std::vector<NamedTensors> lists;
  std::vector<distributed::ShardRange> blocks;
  for (int i = 0; i < count(); ++i) {
    lists.push_back(module(i).named_parameters());
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
