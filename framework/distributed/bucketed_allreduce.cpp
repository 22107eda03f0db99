#include "framework/distributed/bucketed_allreduce.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <stdexcept>

#include "framework/distributed/communicator.hpp"
#include "framework/distributed/grad_ready_hooks.hpp"
#include "framework/distributed/replica_parameters.hpp"
#include "framework/core/strided.hpp"
#include "framework/engine/runtime/clock.hpp"

namespace headgrad::distributed {

std::vector<std::vector<std::size_t>> plan_buckets(const NamedTensors& params, std::size_t bucket_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t bytes = 0;
  for (std::size_t i = params.size(); i-- > 0;) {
    const Tensor& p = params[i].second;
    const std::size_t size = static_cast<std::size_t>(p.numel()) * dtype_size(p.dtype());
    const bool fits = !buckets.empty() && bytes + size <= bucket_bytes &&
                      params[buckets.back().front()].second.dtype() == p.dtype();
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += size;
  }
  return buckets;
}

namespace {

std::int64_t shards_or_default(std::int64_t shards, std::size_t workers) {
  if (workers == 0) throw std::invalid_argument("BucketedAllreduce: no workers");
  if (shards == 0) return static_cast<std::int64_t>(workers) * size();
  if (shards < size())
    throw std::invalid_argument(
        fmt::format("BucketedAllreduce: {} shards over {} ranks (every rank needs a shard)", shards, size()));
  return shards;
}

} // namespace

BucketedAllreduce::BucketedAllreduce(NamedTensors target, std::vector<NamedTensors> workers, std::size_t bucket_bytes,
                                     std::int64_t shards)
    : target_(std::move(target)), workers_(std::move(workers)), shards_(shards_or_default(shards, workers_.size())),
      node_(distributed::rank_shards(shards_, size(), rank())), sums_(shards_, workers_) {
  for (std::size_t w = 0; w < workers_.size(); ++w)
    check_same_parameters(workers_[w], target_,
                          fmt::format("BucketedAllreduce: worker {}'s parameters differ from the target's", w));
  bucket_of_.resize(target_.size());
  for (auto& params : plan_buckets(target_, bucket_bytes)) {
    auto b = std::make_unique<Bucket>();
    std::int64_t numel = 0;
    for (std::size_t i : params) {
      bucket_of_[i] = buckets_.size();
      b->offsets.push_back(numel);
      numel += target_[i].second.numel();
    }
    b->flags = numel;
    b->flat = Tensor::empty({numel + static_cast<std::int64_t>(params.size())}, target_[params.front()].second.dtype());
    b->params = std::move(params);
    buckets_.push_back(std::move(b));
  }
  stats_.buckets = static_cast<std::int64_t>(buckets_.size());
  fired_.assign(workers_.size(), std::vector<char>(target_.size(), 0));
  for (std::size_t w = 0; w < workers_.size(); ++w)
    for (std::size_t i = 0; i < target_.size(); ++i)
      set_grad_ready_hook(workers_[w][i].second, [this, w, i] { on_gradient_ready(w, i); });
  thread_ = std::thread([this] { communicate(); });
}

BucketedAllreduce::~BucketedAllreduce() {
  for (auto& worker : workers_)
    for (auto& [name, p] : worker) set_grad_ready_hook(p, {});
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int BucketedAllreduce::max_active() const {
  return static_cast<int>(std::min<std::int64_t>(static_cast<std::int64_t>(workers_.size()), node_.count()));
}

ShardRange BucketedAllreduce::worker_block(int worker) const { return worker_shards(node_, active_, worker); }

void BucketedAllreduce::begin(int active) {
  if (active < 0 || active > max_active())
    throw std::logic_error(fmt::format("BucketedAllreduce::begin: {} active workers of {} (for {} shards)", active,
                                       workers_.size(), node_.count()));
  {
    std::lock_guard lock(mutex_);
    if (armed_) throw std::logic_error("BucketedAllreduce::begin: the previous step was not finished");
    next_ = 0;
    for (auto& b : buckets_) {
      b->ready = false;
      b->remaining.store(static_cast<int>(b->params.size()) * active, std::memory_order_relaxed);
    }
  }
  for (auto& f : fired_) std::fill(f.begin(), f.end(), 0);
  active_ = active;
  if (active > 0) {
    std::vector<ShardRange> blocks;
    for (int w = 0; w < active; ++w) blocks.push_back(worker_shards(node_, active, w));
    sums_.begin(std::move(blocks));
  }
  armed_.store(true, std::memory_order_release);
  if (active == 0)
    for (std::size_t k = 0; k < buckets_.size(); ++k) pack_and_send(k);
}

void BucketedAllreduce::keep(int worker) { sums_.keep(worker); }

// A hook: worker w's gradient of parameter i is final. During the worker's last backward of the
// step, the last of a bucket's hooks sends it.
void BucketedAllreduce::on_gradient_ready(std::size_t w, std::size_t i) {
  if (!armed_.load(std::memory_order_acquire) || w >= static_cast<std::size_t>(active_)) return; // not in a step
  if (!sums_.at_last_shard(static_cast<int>(w))) return; // an earlier shard: keep() takes it
  if (fired_[w][i])
    throw std::logic_error(fmt::format("BucketedAllreduce: a second backward of worker {} reached '{}' before "
                                       "finish(); one backward per shard, keep() after each but the last",
                                       w, target_[i].first));
  fired_[w][i] = 1;
  const std::size_t k = bucket_of_[i];
  // acq_rel: the other workers' gradient writes, released by their own count-downs, are visible here
  if (buckets_[k]->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) pack_and_send(k);
}

// flat = this rank's sums of the bucket's parameters over its shards, added in the shard tree
// (zeros and flag 0 where no shard reached one); then the communication thread may take it.
void BucketedAllreduce::pack_and_send(std::size_t k) {
  Bucket& b = *buckets_[k];
  dispatch_float(b.flat.dtype(), "BucketedAllreduce", [&]<typename T>() {
    for (std::size_t j = 0; j < b.params.size(); ++j) {
      const std::size_t i = b.params[j];
      const Dims& shape = target_[i].second.shape();
      T* dst = b.flat.data<T>() + b.offsets[j];
      const Tensor g = active_ > 0 ? sums_.sum(i) : Tensor();
      if (g.defined()) book::sum_into<T>(dst, true, shape, g.data<T>(), g.shape(), g.strides(), T(1));
      else std::memset(dst, 0, static_cast<std::size_t>(shape.numel()) * sizeof(T));
      b.flat.data<T>()[b.flags + static_cast<std::int64_t>(j)] = g.defined() ? T(1) : T(0);
    }
  });
  {
    std::lock_guard lock(mutex_);
    b.ready = true;
  }
  cv_.notify_all();
}

void BucketedAllreduce::communicate() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (next_ < buckets_.size() && buckets_[next_]->ready); });
    if (stop_) return;
    Bucket& b = *buckets_[next_];
    const bool failed_before = failure_ != nullptr; // then the rest only counts through (finish() rethrows)
    lock.unlock();
    b.start = runtime::seconds_now();
    std::exception_ptr failed;
    if (!failed_before) {
      try {
        dispatch_float(b.flat.dtype(), "BucketedAllreduce",
                       [&]<typename T>() { allreduce_sum(b.flat.data<T>(), b.flat.numel(), shards_); });
      } catch (...) {
        failed = std::current_exception();
      }
    }
    b.end = runtime::seconds_now();
    lock.lock();
    if (failed) failure_ = failed;
    ++next_;
    cv_.notify_all(); // finish() waits for next_ to reach the end
  }
}

void BucketedAllreduce::finish() {
  if (!armed_.exchange(false, std::memory_order_acq_rel))
    throw std::logic_error("BucketedAllreduce::finish: no step begun");
  const double called = runtime::seconds_now();
  // Every backward is over: no hook runs any more, and whatever a bucket lacks is final (zeros).
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    bool ready = false;
    {
      std::lock_guard lock(mutex_);
      ready = buckets_[k]->ready;
    }
    if (!ready) pack_and_send(k);
  }
  std::exception_ptr failed;
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return next_ == buckets_.size(); });
    failed = failure_;
  }
  if (failed) {
    sums_.end();
    std::rethrow_exception(failed);
  }
  const double done = runtime::seconds_now();
  ++stats_.steps;
  stats_.wait_seconds += done - called;
  for (const auto& b : buckets_) {
    stats_.bytes += static_cast<std::int64_t>(b->flat.numel() * dtype_size(b->flat.dtype()));
    stats_.comm_seconds += b->end - b->start;
    stats_.overlapped_seconds += std::max(0.0, std::min(b->end, called) - b->start);
  }
  // The sums become the target's gradients (fresh tensors: the buffers are reused next step).
  sums_.end();
  for (const auto& b : buckets_)
    for (std::size_t j = 0; j < b->params.size(); ++j) {
      const Tensor& p = target_[b->params[j]].second;
      bool reached = false; // by a shard of any rank: the flags' sum is a count, exact in floats
      dispatch_float(b->flat.dtype(), "BucketedAllreduce",
                     [&]<typename T>() { reached = b->flat.data<T>()[b->flags + static_cast<std::int64_t>(j)] > T(0); });
      p.impl()->grad.reset();
      if (!reached) continue;
      Tensor g = new_tensor(p.shape(), p.dtype());
      std::memcpy(g.raw(), static_cast<char*>(b->flat.raw()) + b->offsets[j] * dtype_size(p.dtype()),
                  static_cast<std::size_t>(p.numel()) * dtype_size(p.dtype()));
      p.impl()->grad = g.impl_ptr();
    }
}

} // namespace headgrad::distributed
