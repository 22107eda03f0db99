// dropout_state.hpp - the dropout generators of a run, one set per shard of the batch, and their
// state in a checkpoint, so that a resumed run draws the masks the uninterrupted one would have
// (torch.get_rng_state / set_rng_state in a PyTorch checkpoint).
//
// Shard s draws its masks from generators of its own, whichever worker of whichever rank runs it
// (parallel_step loads them into the worker before the shard's forward and takes them back after),
// so that masks, like the gradient sums, depend on the shard count and not on the layout. They
// start as worker s of a single process with S threads seeds its own: shard 0 as the model built
// from the run's seed, shard s > 0 as the replica seeded mix_seed(seed, s)
// (train/parallel/thread_replicas.hpp). A checkpoint keeps every shard's, under its shard and module name:
//   "rng.shard1.blks.0.addnorm1.dropout"  int64 (6): the four xoshiro words, has_spare, spare (the
//                                          words and the double as raw bits)
// Checkpoints written before shards kept a single process's workers as "rng.rank0.worker<s>.*":
// that worker ran shard s, and its entries restore shard s.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/distributed/shard_tree.hpp"
#include "framework/core/random.hpp"
#include "models/token_model.hpp"

namespace headgrad::train {

class ShardDropout {
public:
  // The generators of this rank's shards `mine` of a run of `shards` shards of `model` (the run's,
  // built from `seed`, before any step).
  ShardDropout(models::TokenModel& model, std::uint64_t seed, std::int64_t shards, distributed::ShardRange mine);

  // Before shard s's forward on `worker` (a model of the run's architecture): its dropout modules
  // draw from shard s's generators. After it, store() takes their state back. Different shards
  // may be loaded and stored on different threads at once.
  void load(nn::Module& worker, std::int64_t shard) const;
  void store(nn::Module& worker, std::int64_t shard);

  // The generators of any model's dropout modules (nn::Dropout, found by module name), seeded by
  // the run rather than by the model: module j of shard s draws from
  // Generator(mix_seed(mix_seed(seed, s), j)), so every layer of every shard draws masks of its own
  // however the model seeded them (the Trainer's, train/fit/trainer.hpp).
  static ShardDropout seeded_per_module(nn::Module& model, std::uint64_t seed, std::int64_t shards,
                                        distributed::ShardRange mine);

  // Every shard's generator states, gathered from every rank when there are several (a
  // collective: every rank calls it at the same step).
  NamedTensors states() const;
  // Sets the generators of this rank's shards that `states` holds entries for (others keep their
  // seeded state: a run resumed with more shards than it was saved with). Throws
  // std::invalid_argument naming `source` and the entry if one is malformed.
  void restore(const NamedTensors& states, const std::string& source);

private:
  ShardDropout() = default;
  std::int64_t shards_ = 1;
  distributed::ShardRange mine_;
  std::vector<std::string> modules_;              // the dropout modules' names, in module order
  std::vector<std::vector<GeneratorState>> gens_; // [shard - mine.first][module]
};

} // namespace headgrad::train
