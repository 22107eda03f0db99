// bucketed_allreduce.hpp - the gradients of a model summed over the ranks of a job while backward
// is still running: PyTorch DDP's reducer (Li et al., "PyTorch Distributed: Experiences on
// Accelerating Data Parallel Training", VLDB 2020, section 3.2.3).
//
// The parameters are grouped into buckets of about `bucket_bytes`, in reverse registration order:
// a model that registers its layers from input to output gets its gradients final in about that
// order during backward. A gradient-ready hook (grad_ready_hooks.hpp) on every parameter counts
// its bucket down during each worker's last backward of the step; the thread whose hook completes
// a bucket adds the rank's shard gradients in the shard tree (shard_gradients.hpp) into the
// bucket's flat buffer and hands it to the communication thread, which all-reduces the buckets
// one after the other in bucket order - the same order on every rank, as MPI requires of
// collectives - with the tree's additions (allreduce_sum over the shards), while backward goes on
// with the layers below. finish() sends what is left, waits, and gives the sums to the model's
// gradients. The result has the bits of the shard tree, however the shards are spread over ranks
// and workers.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "framework/distributed/shard_gradients.hpp"
#include "framework/core/tensor.hpp"

namespace headgrad::distributed {

// 1 MiB: a model of a few MB gets several buckets to overlap with backward, and a bucket is large
// enough that the per-message latency (tens of microseconds) stays small beside its transfer.
// PyTorch DDP uses 25 MiB for models of hundreds of MB (bucket_cap_mb).
inline constexpr std::size_t kDefaultBucketBytes = std::size_t{1} << 20;

// Communication of the steps so far (added up over them).
struct CommStats {
  std::int64_t buckets = 0;
  std::int64_t steps = 0;
  std::int64_t bytes = 0;        // all-reduced (each rank's buffers, with one flag per parameter;
                                 // the all-reduce sends about 2x this per rank)
  double comm_seconds = 0;       // wall time of the all-reduces, each from its start to its end
  double overlapped_seconds = 0; // the part of comm_seconds before finish() was called, i.e.
                                 // while backward was still running
  double wait_seconds = 0;       // time finish() waited for the communication: what was not hidden
};

// Parameter indices per bucket: reverse order, a new bucket when the next parameter would take
// one past `bucket_bytes` (a parameter larger than that gets a bucket of its own) or has another
// dtype. Every bucket holds at least one parameter.
std::vector<std::vector<std::size_t>> plan_buckets(const NamedTensors& params, std::size_t bucket_bytes);

class BucketedAllreduce {
public:
  // `target`: the parameters whose gradients receive the sums (a model's named_parameters()).
  // `workers`: lists of the same names, shapes and dtypes whose backward passes make this rank's
  // gradients - the model itself and its thread replicas - each on a thread of its own.
  // `shards`: S, the job's shard count (0: one per worker of every rank, workers x size()); this
  // rank trains the shards rank_shards(S, size(), rank()). std::invalid_argument when the lists
  // differ or S < size().
  BucketedAllreduce(NamedTensors target, std::vector<NamedTensors> workers,
                    std::size_t bucket_bytes = kDefaultBucketBytes, std::int64_t shards = 0);
  ~BucketedAllreduce(); // removes the hooks; ends the communication thread
  BucketedAllreduce(const BucketedAllreduce&) = delete;
  BucketedAllreduce& operator=(const BucketedAllreduce&) = delete;

  std::int64_t shards() const { return shards_; }
  ShardRange rank_shards() const { return node_; } // this rank's shards
  // The most workers a step can use: one per worker list, at most one per shard of the rank.
  int max_active() const;

  // Before a step's backward passes: workers 0 .. active-1 run the rank's shards, worker w the
  // block worker_shards(rank_shards(), active, w), one backward per shard in shard order, and
  // keep() after each but the last; the other workers add nothing. With active = 0 (a rank without
  // rows this step) every bucket goes out at once, as no gradient.
  void begin(int active);
  ShardRange worker_block(int worker) const; // this step's shards of an active worker
  // After worker w's backward of a shard that is not its last this step (on w's thread): its
  // gradients join the rank's sum (ShardGradients::keep).
  void keep(int worker);
  // After the last backward: sends the buckets no hook completed, waits for every all-reduce, sets
  // each target gradient to the sum over all shards of all ranks (none for a parameter that no
  // shard's backward reached; zeros from a shard that did not reach one that others did), and
  // drops the workers' gradients. Rethrows what the communication failed with (RankTimeout).
  // std::logic_error without begin().
  void finish();

  std::size_t bucket_count() const { return buckets_.size(); }
  const CommStats& stats() const { return stats_; }

private:
  struct Bucket {
    std::vector<std::size_t> params;   // indices into target_ (and every worker's list)
    std::vector<std::int64_t> offsets; // where each starts in `flat`, in elements
    std::int64_t flags = 0;            // where the flags start: per parameter 1 if this rank's
                                       // shards reached it, else 0 (summed: how many ranks did)
    Tensor flat;                       // the bucket's gradients back to back, then the flags
    std::atomic<int> remaining{0};     // hooks still to run this step
    bool ready = false;                // packed and handed to the communication thread (mutex_)
    double start = 0, end = 0;         // its all-reduce this step (communication thread)
  };
  void on_gradient_ready(std::size_t worker, std::size_t param);
  void pack_and_send(std::size_t bucket);
  void communicate(); // the communication thread

  NamedTensors target_;
  std::vector<NamedTensors> workers_;
  std::int64_t shards_ = 1;
  ShardRange node_;
  ShardGradients sums_;
  std::exception_ptr failure_; // what the communication thread failed with (mutex_)
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::size_t> bucket_of_; // parameter -> bucket
  std::vector<std::vector<char>> fired_; // [worker][param]: its hook ran this step
  std::atomic<bool> armed_{false};
  int active_ = 0;
  CommStats stats_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t next_ = 0; // the bucket the communication thread all-reduces next (mutex_)
  bool stop_ = false;
  std::thread thread_;
};

} // namespace headgrad::distributed
