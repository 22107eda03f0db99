#include "framework/distributed/shard_tree.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

namespace headgrad::distributed {

bool is_tree_node(ShardRange r, std::int64_t shards) {
  std::int64_t lo = 0, hi = shards;
  for (;;) {
    if (r.first == lo && r.end == hi) return true;
    if (hi - lo < 2 || r.first < lo || r.end > hi || r.count() < 1) return false;
    const std::int64_t mid = tree_split(lo, hi);
    if (r.end <= mid) hi = mid;
    else if (r.first >= mid) lo = mid;
    else return false; // straddles the split
  }
}

bool tree_siblings(ShardRange left, ShardRange right, std::int64_t shards) {
  if (left.end != right.first || left.count() < 1 || right.count() < 1) return false;
  const ShardRange parent{left.first, right.end};
  return tree_split(parent.first, parent.end) == left.end && is_tree_node(parent, shards);
}

std::vector<ShardRange> tree_nodes_at_depth(std::int64_t shards, int depth) {
  if (depth < 0 || depth > 62 || shards < (std::int64_t{1} << depth))
    throw std::invalid_argument(fmt::format("tree_nodes_at_depth: {} shards have no full level {}", shards, depth));
  std::vector<ShardRange> level{{0, shards}};
  for (int d = 0; d < depth; ++d) {
    std::vector<ShardRange> next;
    for (const ShardRange& n : level) {
      const std::int64_t mid = tree_split(n.first, n.end);
      next.push_back({n.first, mid});
      next.push_back({mid, n.end});
    }
    level = std::move(next);
  }
  return level;
}

ShardRange shard_rows(std::int64_t rows, std::int64_t shards, std::int64_t shard) {
  if (shards < 1 || shard < 0 || shard >= shards || rows < 0)
    throw std::invalid_argument(fmt::format("shard_rows: shard {} of {} over {} rows", shard, shards, rows));
  return {rows * shard / shards, rows * (shard + 1) / shards};
}

RankLayout rank_layout(std::int64_t shards, int ranks) {
  if (ranks < 1 || shards < ranks)
    throw std::invalid_argument(
        fmt::format("rank_layout: {} shards cannot be spread over {} ranks (every rank needs a shard)", shards, ranks));
  RankLayout l;
  int depth = 0;
  while ((l.pow2 << 1) <= ranks) {
    l.pow2 <<= 1;
    ++depth;
  }
  const std::vector<ShardRange> level = tree_nodes_at_depth(shards, depth);
  // The ranks - p nodes that hold two ranks: the largest (all have two or more shards since
  // shards >= ranks), the leftmost first among equals.
  std::vector<int> order(level.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return level[a].count() > level[b].count(); });
  std::vector<char> split(level.size(), 0);
  for (int i = 0; i < ranks - l.pow2; ++i) split[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = 1;
  for (std::size_t v = 0; v < level.size(); ++v) {
    const int rank = static_cast<int>(l.nodes.size());
    l.participant.push_back(rank);
    if (split[v]) {
      const std::int64_t mid = tree_split(level[v].first, level[v].end);
      l.nodes.push_back({level[v].first, mid});
      l.nodes.push_back({mid, level[v].end});
      l.virtual_rank.insert(l.virtual_rank.end(), {static_cast<int>(v), static_cast<int>(v)});
      l.pair.insert(l.pair.end(), {rank + 1, rank});
    } else {
      l.nodes.push_back(level[v]);
      l.virtual_rank.push_back(static_cast<int>(v));
      l.pair.push_back(-1);
    }
  }
  return l;
}

ShardRange rank_shards(std::int64_t shards, int ranks, int rank) {
  const RankLayout l = rank_layout(shards, ranks);
  if (rank < 0 || rank >= ranks) throw std::invalid_argument(fmt::format("rank_shards: rank {} of {}", rank, ranks));
  return l.nodes[static_cast<std::size_t>(rank)];
}

ShardRange worker_shards(ShardRange node, int workers, int worker) {
  const std::int64_t n = node.count();
  if (workers < 1 || workers > n || worker < 0 || worker >= workers)
    throw std::invalid_argument(
        fmt::format("worker_shards: worker {} of {} over {} shards (each worker needs a shard)", worker, workers, n));
  return {node.first + n * worker / workers, node.first + n * (worker + 1) / workers};
}

} // namespace headgrad::distributed
