// shard_tree.hpp - the one order in which a data-parallel step adds up its shards' gradients, so
// that the bits of a run depend on the global batch and the shard count S only - not on how the
// shards are spread over ranks and threads (docs/distributed.md, "Reproducible sums").
//
// The global batch is cut into S shards. Their gradients are added in a fixed pairwise tree over
// the shard index: the root is [0, S); a node [lo, hi) with two or more shards has the children
// [lo, mid) and [mid, hi), mid = tree_split(lo, hi) = lo + ceil((hi - lo) / 2); a node is the sum
// of its children. Floating-point addition is commutative but not associative, so the tree (which
// pairs are added) fixes the bits, and the order within a pair does not matter.
//
// Every rank holds one node of the tree (rank_shards): with N ranks, p = 2^floor(log2 N), the
// p nodes at depth log2 p, the N - p largest of them split once more into their two children.
// That is the shape of Rabenseifner's all-reduce for any N (Thakur, Rabenseifner and Gropp,
// "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005): the pairs of
// ranks that share a node add first, then recursive halving over the p nodes adds siblings level
// by level (tree_allreduce.hpp). Inside a rank, workers (threads) run contiguous blocks of its
// shards and TreeSum adds whatever is complete as soon as both halves are there.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace headgrad::distributed {

// Shards (or rows) [first, end).
struct ShardRange {
  std::int64_t first = 0, end = 0;
  std::int64_t count() const { return end - first; }
  bool operator==(const ShardRange&) const = default;
};

// Where the tree splits the node [lo, hi) (hi - lo >= 2): lo + ceil((hi - lo) / 2).
inline std::int64_t tree_split(std::int64_t lo, std::int64_t hi) { return lo + (hi - lo + 1) / 2; }

// Whether `range` is a node of the tree over `shards` shards.
bool is_tree_node(ShardRange range, std::int64_t shards);

// Whether `left` and `right` are the two children of one node (adjacent, left first).
bool tree_siblings(ShardRange left, ShardRange right, std::int64_t shards);

// The nodes at `depth` (the root is depth 0), left to right; every node above that depth must
// have two or more shards (shards >= 2^depth). std::invalid_argument otherwise.
std::vector<ShardRange> tree_nodes_at_depth(std::int64_t shards, int depth);

// The rows of shard s of a global batch of `rows` rows: [rows s / S, rows (s + 1) / S), so that
// shard sizes differ by at most one.
ShardRange shard_rows(std::int64_t rows, std::int64_t shards, std::int64_t shard);

// Which ranks hold which node of the tree, and how Rabenseifner's all-reduce pairs them.
struct RankLayout {
  int pow2 = 1;                       // p: the largest power of two <= the rank count
  std::vector<ShardRange> nodes;      // rank -> its node (a node of the tree, nonempty)
  std::vector<int> virtual_rank;      // rank -> its place 0 .. p-1 among the nodes at depth log2 p
  std::vector<int> pair;              // rank -> the other rank sharing its depth-log2(p) node, or -1
  std::vector<int> participant;       // virtual rank -> the rank that takes part in the halving
                                      // (the left one of a pair)
};
// For `ranks` ranks over `shards` shards: std::invalid_argument unless 1 <= ranks <= shards.
RankLayout rank_layout(std::int64_t shards, int ranks);
// rank_layout(shards, ranks).nodes[rank]
ShardRange rank_shards(std::int64_t shards, int ranks, int rank);

// Worker w of `workers` runs the shards [first + n w / W, first + n (w + 1) / W) of `node`
// (n = node.count(), W = workers <= n): contiguous blocks in worker order.
ShardRange worker_shards(ShardRange node, int workers, int worker);

// Adds values that stand for nodes of the tree, pushed left to right, in the tree's order: each
// push adds the new value to its left neighbour as long as the two are siblings. After pushing
// the leaves (or already added subtrees) that make up a node, one value is left: that node's sum,
// with exactly the additions of the tree. `add(left, right)` must leave left + right in `left`.
template <typename T> class TreeSum {
public:
  explicit TreeSum(std::int64_t shards) : shards_(shards) {}

  template <typename Add> void push(ShardRange range, T value, Add&& add) {
    if (!stack_.empty() && stack_.back().first.end != range.first)
      throw std::logic_error("TreeSum::push: the ranges must follow each other left to right");
    stack_.emplace_back(range, std::move(value));
    while (stack_.size() >= 2 && tree_siblings(stack_[stack_.size() - 2].first, stack_.back().first, shards_)) {
      auto& left = stack_[stack_.size() - 2];
      add(left.second, stack_.back().second);
      left.first.end = stack_.back().first.end;
      stack_.pop_back();
    }
  }

  // The values not yet added to a sibling (a partial sum: complete subtrees, left to right).
  const std::vector<std::pair<ShardRange, T>>& pending() const { return stack_; }
  std::vector<std::pair<ShardRange, T>>& pending() { return stack_; }

  // The one value left, the sum of the node pushed (std::logic_error if the pushes do not make one
  // node yet); the TreeSum is empty afterwards.
  T take() {
    if (stack_.size() != 1) throw std::logic_error("TreeSum::take: the ranges pushed do not make one node of the tree");
    T value = std::move(stack_.back().second);
    stack_.clear();
    return value;
  }

private:
  std::int64_t shards_;
  std::vector<std::pair<ShardRange, T>> stack_;
};

} // namespace headgrad::distributed
