// data_parallel.hpp - data-parallel training of any nn::Module over the ranks of an MPI job, for a
// training loop of one's own (headgrad train does the same for its model in train/loop/train_step.cpp):
//
//   headgrad::distributed::Session mpi(argc, argv);        // MPI when mpirun/srun started us
//   MyNet net;                                             // any nn::Module
//   headgrad::distributed::DataParallel ddp(net);          // rank 0's values on every rank
//   headgrad::optim::Adam opt(net.named_parameters(), {.lr = 1e-3});
//   for (std::int64_t step = 0; step < steps; ++step) {
//     const auto [x, y] = my_rows(step, distributed::rank(), distributed::size()); // this rank's shard
//     opt.zero_grad();
//     ddp.backward(my_loss(net.forward(x), y) * share);   // share: my rows / all rows (or my
//     opt.step();                                          // counted tokens / all counted tokens)
//   }
//
// Gradients are summed over the ranks, so each rank weights its loss by its share of the global
// batch: the sum is then the gradient of the global batch's loss, also for uneven shards (for
// equal shards, share = 1 / size(): PyTorch DDP's averaging). Rank r counts as shard r of the shard
// tree (shard_tree.hpp, S = size()): the sums are added in that tree, the same bits in every run
// of the job. A parameter that no rank's backward reached keeps no gradient, as after a plain
// backward; one that some reached counts zeros from the others.
#pragma once
#include <cstddef>

#include "framework/distributed/bucketed_allreduce.hpp"
#include "framework/nn/module.hpp"

namespace headgrad::distributed {

class DataParallel {
public:
  // Checks that every rank has the same parameter list (names, shapes, dtypes) and gives every
  // rank rank 0's values. Both are collectives: every rank constructs its DataParallel together.
  // std::invalid_argument naming the first parameter that differs.
  explicit DataParallel(nn::Module& module, std::size_t bucket_bytes = kDefaultBucketBytes);

  // loss.backward(), with the module's gradients summed over the ranks: in buckets, each
  // all-reduced as soon as backward has made its gradients final. Every rank calls it (or
  // backward_without_data) once per step; afterwards every rank holds the same gradients.
  void backward(const Tensor& loss);
  // For a rank that has no rows this step: adds zero gradients to the sum.
  void backward_without_data();

  const CommStats& stats() const { return reducer_.stats(); }

private:
  BucketedAllreduce reducer_;
};

// Every rank gets rank 0's parameter values (a collective).
void broadcast_parameters(nn::Module& module);

// The simplest form, for after backward (no overlap): every parameter gradient of `module` is
// summed over the ranks in the shard tree (rank r as shard r), a rank without a gradient of a
// parameter counting zeros (a parameter no rank has one of keeps none); afterwards every rank
// holds the sums. One all-reduce per parameter, and one for which ranks have which (a collective).
void allreduce_gradients(nn::Module& module);

} // namespace headgrad::distributed
