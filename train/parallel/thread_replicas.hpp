// thread_replicas.hpp - data parallelism over the threads of one process. A small model's step is
// ~50 ops of a few tens of microseconds each; handing every op to two threads costs about as much
// as it saves. Instead each thread runs the whole forward and backward on its own rows of the
// batch, with every op on one thread, and the gradients are added up once at the end (the design
// of data-parallel training - PyTorch DDP, Li et al. 2020 - inside one process, with shared
// parameter memory instead of an all-reduce). parallel_step spreads a batch's shards over the workers
// and adds their gradients in the shard tree (framework/distributed/shard_tree.hpp).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "framework/engine/runtime/spin_pool.hpp"
#include "models/token_model.hpp"

namespace headgrad::train {

class ThreadReplicas {
public:
  // `threads` >= 1 workers for `model`: worker 0 is the model itself, each other one a replica that
  // reads the model's parameter values (so it sees every update) and has gradients of its own.
  // The replicas' dropout draws its own masks (seeded from `seed`).
  ThreadReplicas(models::TokenModel& model, int threads, std::uint64_t seed);
  // The same for any model: replica i (1 <= i < threads) is make_replica(i), a fresh model of the
  // same architecture (its values are replaced by the model's). worker(i) is then not available
  // (std::logic_error): module(i) is.
  ThreadReplicas(nn::Module& model, int threads, const std::function<std::unique_ptr<nn::Module>(int)>& make_replica);

  int count() const { return static_cast<int>(replicas_.size()) + 1; }
  // count() threads (the caller's and count() - 1 workers) that the training step runs its shards,
  // gradient sums and update on, spinning between them (framework/engine/runtime/spin_pool.hpp).
  runtime::SpinPool& pool() { return *pool_; }
  nn::Module& module(int i) { return i == 0 ? model_ : *replicas_[static_cast<std::size_t>(i - 1)]; }
  models::TokenModel& worker(int i);

  // Puts every replica in the model's train/eval mode.
  void follow_mode();
  // The model's gradients become the sum of every worker's (the model's included), worker i
  // counting as shard i of count() shards and the sum taken in the shard tree, the bits of the
  // same shards run anywhere else; the replicas' gradients are dropped.
  void add_gradients_to_model();

private:
  void share_and_start(int threads);
  nn::Module& model_;
  bool token_models_ = false; // built from a TokenModel: worker(i) is one
  std::vector<std::unique_ptr<nn::Module>> replicas_;
  std::unique_ptr<runtime::SpinPool> pool_;
};

// The workers a run with `threads` threads trains with: none (null: every op may use the threads
// itself) for one thread, else one per thread. The trainer and the benchmark both ask here.
std::unique_ptr<ThreadReplicas> workers_for(models::TokenModel& model, int threads, std::uint64_t seed);

} // namespace headgrad::train
