// rank_shard.hpp - what one rank of `headgrad train` under MPI trains on: its shards of the global
// batch, and the all-reduce that sums its workers' gradients with every other rank's in the shard
// tree while backward runs (framework/distributed/bucketed_allreduce.hpp, shard_tree.hpp).
#pragma once
#include <cstdint>
#include <memory>

#include "framework/distributed/bucketed_allreduce.hpp"
#include "train/parallel/thread_replicas.hpp"

namespace headgrad::train {

// Rows [first, first + count) of a global batch of `rows` rows for rank r of n when every rank
// trains one shard (S = n, as a training loop of one's own with DataParallel does):
// [rows r / n, rows (r + 1) / n), so shard sizes differ by at most one (and are 0 for rows < n).
// This is distributed::shard_rows(rows, n, r): rank r holds shard r of the shard tree.
struct Shard {
  std::int64_t first = 0, count = 0;
};
Shard shard_of(std::int64_t rows, int rank, int size);

// The gradient all-reduce of a rank training `model` (its gradients receive the sums) with its
// thread replicas (null: the model is the only worker), for a run of `shards` shards (S >= the
// rank count); null in a job of one rank.
std::unique_ptr<distributed::BucketedAllreduce> gradient_allreduce_for(nn::Module& model,
                                                                       ThreadReplicas* replicas, std::int64_t shards);

} // namespace headgrad::train
