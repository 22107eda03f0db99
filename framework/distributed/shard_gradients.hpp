// shard_gradients.hpp - the gradients of one rank's shards added up in the shard tree
// (shard_tree.hpp), whichever workers ran them and in whatever grouping.
//
// A rank's workers (the model and its thread replicas, one thread each) run contiguous blocks of
// the rank's shards, each its block's shards one after the other (gradient accumulation). After
// every shard but a worker's last, keep() moves the worker's gradients onto its stack, where
// siblings are added at once (a worker with k shards holds at most log2 k + 1 partial sums). The
// last shard's gradients stay in the worker's parameters, so that a gradient-ready hook can see
// them final during that backward; sum(i) then adds parameter i's partial sums of every worker in
// the tree and returns the rank's sum.
//
// A shard whose backward did not reach a parameter adds zeros to it (+0: a -0 added to them is
// +0, as the sum of a zero would give it); when no shard reached it, it has no sum (undefined), as
// a single backward leaves such a parameter.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "framework/distributed/shard_tree.hpp"
#include "framework/core/tensor.hpp"

namespace headgrad::distributed {

class ShardGradients {
public:
  // `workers`: the workers' parameter lists (same names, shapes and dtypes; not checked here).
  // `shards`: S, the tree's size.
  ShardGradients(std::int64_t shards, std::vector<NamedTensors> workers);

  // Starts a step: worker w (< blocks.size()) runs the shards blocks[w], in order; the blocks
  // follow each other and together make one node of the tree. Drops what an earlier step left.
  void begin(std::vector<ShardRange> blocks);
  // Worker w finished the backward of its next shard and has another one to run: its parameters'
  // gradients move onto its stack (the parameters have none afterwards). Call from worker w's
  // thread; std::logic_error after its last shard.
  void keep(int worker);
  // Whether worker w's next backward is its last of the step.
  bool at_last_shard(int worker) const;

  // Parameter i's sum over the step's shards: the partial sums of every worker and the gradient of
  // its last shard (still in its parameter), added in the tree, in place into their buffers.
  // Undefined when no shard's backward reached it. Once per parameter and step, after every
  // worker's last backward reached it; calls for different parameters may run on several threads.
  Tensor sum(std::size_t param);
  // Every parameter's sum(i), the parameters spread over the OpenMP threads (each sum is one
  // parameter's own tree, so the bits do not depend on which thread adds it). then(i, sum), if
  // given, runs on the thread that made sum i right after it, while the sum is in that core's
  // cache (the trainer takes each gradient's sum of squares there); it must not throw.
  std::vector<Tensor> sum_all(const std::function<void(std::size_t, const Tensor&)>& then = {});
  // Drops the kept sums and every worker's gradients (the parameters then have none).
  void end();

  std::size_t parameter_count() const { return workers_.empty() ? 0 : workers_[0].size(); }
  std::int64_t shards() const { return shards_; }

private:
  struct Kept {
    ShardRange range;
    std::vector<Tensor> grads; // per parameter (undefined: no shard of `range` reached it)
  };
  std::int64_t shards_;
  std::vector<NamedTensors> workers_;
  std::vector<ShardRange> blocks_;
  std::vector<std::vector<Kept>> stacks_; // per worker, left to right
  std::vector<std::int64_t> kept_;         // per worker: shards kept this step
};

// left + right into `left` for gradients of one parameter: both defined, added in left's buffer;
// one undefined (zeros), the other with every -0 made +0; both undefined, left stays undefined.
void add_shard_gradient(Tensor& left, Tensor& right);

} // namespace headgrad::distributed
