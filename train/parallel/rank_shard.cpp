#include "train/parallel/rank_shard.hpp"

#include "framework/distributed/communicator.hpp"

namespace headgrad::train {

Shard shard_of(std::int64_t rows, int rank, int size) {
  const std::int64_t first = rows * rank / size, end = rows * (rank + 1) / size;
  return {first, end - first};
}

std::unique_ptr<distributed::BucketedAllreduce> gradient_allreduce_for(nn::Module& model,
                                                                       ThreadReplicas* replicas, std::int64_t shards) {
  if (distributed::size() == 1) return nullptr;
  std::vector<NamedTensors> workers;
  const int n = replicas ? replicas->count() : 1;
  for (int i = 0; i < n; ++i) workers.push_back(replicas ? replicas->module(i).named_parameters() : model.named_parameters());
  return std::make_unique<distributed::BucketedAllreduce>(model.named_parameters(), std::move(workers),
                                                          distributed::kDefaultBucketBytes, shards);
}

} // namespace headgrad::train
