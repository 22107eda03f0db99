// rank_shard.hpp - what one rank of `headgrad train` under MPI trains on: its rows of the global
// batch, and the all-reduce that sums its workers' gradients with every other rank's while
// backward runs (framework/distributed/bucketed_allreduce.hpp).
#pragma once
#include <cstdint>
#include <memory>

#include "framework/distributed/bucketed_allreduce.hpp"
#include "train/thread_replicas.hpp"

namespace headgrad::train {

// Rows [first, first + count) of a global batch of `rows` rows: rank r of n takes
// [rows r / n, rows (r + 1) / n), so shard sizes differ by at most one (and are 0 for rows < n).
struct Shard {
  std::int64_t first = 0, count = 0;
};
Shard shard_of(std::int64_t rows, int rank, int size);

// The gradient all-reduce of a rank training `model` (its gradients receive the sums) with its
// thread replicas (null: the model is the only worker); null in a job of one rank.
std::unique_ptr<distributed::BucketedAllreduce> gradient_allreduce_for(models::TokenModel& model,
                                                                       ThreadReplicas* replicas);

} // namespace headgrad::train
