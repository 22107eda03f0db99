#include "framework/distributed/shard_gradients.hpp"

#include <fmt/format.h>
#include <stdexcept>

#include "framework/core/strided.hpp"
#include "framework/engine/kernels/parallel.hpp"
#include "framework/engine/runtime/spin_pool.hpp"

namespace headgrad::distributed {
namespace {

// x + 0 for every element: what adding a shard's zeros does (-0 + 0 = +0, everything else stays).
template <typename T> void add_zeros(T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] += T(0);
}

} // namespace

void add_shard_gradient(Tensor& left, Tensor& right) {
  if (!right.defined() && !left.defined()) return;
  if (!left.defined()) std::swap(left, right);
  if (!right.defined()) {
    dispatch_float(left.dtype(), "add_shard_gradient", [&]<typename T>() { add_zeros(left.data<T>(), left.numel()); });
    return;
  }
  dispatch_float(left.dtype(), "add_shard_gradient", [&]<typename T>() {
    book::sum_into<T>(left.data<T>(), false, left.shape(), right.data<T>(), right.shape(), right.strides(), T(1));
  });
  right = Tensor();
}

ShardGradients::ShardGradients(std::int64_t shards, std::vector<NamedTensors> workers)
    : shards_(shards), workers_(std::move(workers)) {
  if (shards < 1 || workers_.empty()) throw std::invalid_argument("ShardGradients: no shards or no workers");
  stacks_.resize(workers_.size());
  kept_.assign(workers_.size(), 0);
}

void ShardGradients::begin(std::vector<ShardRange> blocks) {
  if (blocks.empty() || blocks.size() > workers_.size())
    throw std::logic_error(fmt::format("ShardGradients::begin: {} blocks for {} workers", blocks.size(), workers_.size()));
  for (std::size_t w = 0; w < blocks.size(); ++w)
    if (blocks[w].count() < 1 || (w > 0 && blocks[w].first != blocks[w - 1].end))
      throw std::logic_error("ShardGradients::begin: the blocks must be nonempty and follow each other");
  if (!is_tree_node({blocks.front().first, blocks.back().end}, shards_))
    throw std::logic_error("ShardGradients::begin: the blocks do not make a node of the shard tree");
  for (auto& s : stacks_) s.clear();
  std::fill(kept_.begin(), kept_.end(), 0);
  blocks_ = std::move(blocks);
}

bool ShardGradients::at_last_shard(int w) const {
  const auto i = static_cast<std::size_t>(w);
  return i < blocks_.size() && kept_[i] == blocks_[i].count() - 1;
}

void ShardGradients::keep(int w) {
  const auto i = static_cast<std::size_t>(w);
  if (i >= blocks_.size() || kept_[i] >= blocks_[i].count() - 1)
    throw std::logic_error(fmt::format("ShardGradients::keep: worker {} has no further shard this step", w));
  Kept leaf{{blocks_[i].first + kept_[i], blocks_[i].first + kept_[i] + 1}, {}};
  for (auto& [name, p] : workers_[i]) {
    leaf.grads.push_back(p.grad());
    p.impl()->grad.reset();
  }
  ++kept_[i];
  // push onto the stack, adding siblings (a TreeSum over whole gradient lists)
  auto& stack = stacks_[i];
  stack.push_back(std::move(leaf));
  while (stack.size() >= 2 && tree_siblings(stack[stack.size() - 2].range, stack.back().range, shards_)) {
    Kept& left = stack[stack.size() - 2];
    Kept& right = stack.back();
    for (std::size_t j = 0; j < left.grads.size(); ++j) add_shard_gradient(left.grads[j], right.grads[j]);
    left.range.end = right.range.end;
    stack.pop_back();
  }
}

Tensor ShardGradients::sum(std::size_t param) {
  TreeSum<Tensor> tree(shards_);
  for (std::size_t w = 0; w < blocks_.size(); ++w) {
    if (kept_[w] != blocks_[w].count() - 1)
      throw std::logic_error(fmt::format("ShardGradients::sum: worker {} has not reached its last shard", w));
    for (Kept& k : stacks_[w]) tree.push(k.range, std::move(k.grads[param]), add_shard_gradient);
    tree.push({blocks_[w].end - 1, blocks_[w].end}, workers_[w][param].second.grad(), add_shard_gradient);
  }
  return tree.take();
}

std::vector<Tensor> ShardGradients::sum_all(const std::function<void(std::size_t, const Tensor&)>& then) {
  // sum's check first, here: an exception must not leave an OpenMP region
  for (std::size_t w = 0; w < blocks_.size(); ++w)
    if (kept_[w] != blocks_[w].count() - 1)
      throw std::logic_error(fmt::format("ShardGradients::sum_all: worker {} has not reached its last shard", w));
  std::vector<Tensor> out(parameter_count());
  std::int64_t elements = 0;
  for (const auto& [name, p] : workers_[0]) elements += p.numel();
  const auto count = static_cast<std::int64_t>(out.size());
  // (cost 2: each element is added, and then squared for the norm by `then`)
  const bool awake = runtime::current_pool() != nullptr;
  const bool split = count > 1 && (awake ? engine::worth_awake_threads(elements, 2) : engine::worth_threads(elements, 2));
  runtime::parallel_for(count, split, [&](std::int64_t i) {
    const auto p = static_cast<std::size_t>(i);
    out[p] = sum(p);
    if (then) then(p, out[p]);
  });
  return out;
}

void ShardGradients::end() {
  for (auto& s : stacks_) s.clear();
  for (auto& worker : workers_)
    for (auto& [name, p] : worker) p.impl()->grad.reset();
  blocks_.clear();
  std::fill(kept_.begin(), kept_.end(), 0);
}

} // namespace headgrad::distributed
