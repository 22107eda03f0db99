#include "framework/distributed/tree_allreduce.hpp"

#include "framework/distributed/shard_tree.hpp"

namespace headgrad::distributed {

std::vector<Exchange> tree_allreduce_schedule(std::int64_t shards, int ranks, int rank, std::int64_t n) {
  std::vector<Exchange> out;
  if (ranks == 1 || n == 0) return out;
  const RankLayout l = rank_layout(shards, ranks);
  const auto r = static_cast<std::size_t>(rank);
  const int pair = l.pair[r];
  int steps = 0;
  while ((1 << steps) < l.pow2) ++steps;
  const int pre_tag = 1, post_tag = 2, halving_tag = 3, doubling_tag = 3 + steps;
  // 1: the right rank of a pair hands its sum to the left one, then waits for the result (4)
  if (pair >= 0 && pair < rank) {
    out.push_back({pair, pre_tag, 0, n, 0, 0, false});
    out.push_back({pair, post_tag, 0, 0, 0, n, false});
    return out;
  }
  if (pair >= 0) out.push_back({pair, pre_tag, 0, 0, 0, n, true});
  // 2: recursive halving. kept[k]: the elements this rank shares with its partner at step k.
  const int v = l.virtual_rank[r];
  std::vector<std::pair<std::int64_t, std::int64_t>> kept{{0, n}};
  for (int k = 0; k < steps; ++k) {
    const auto [lo, hi] = kept.back();
    const std::int64_t mid = lo + (hi - lo) / 2;
    const int partner = l.participant[static_cast<std::size_t>(v ^ (1 << k))];
    const bool lower = (v & (1 << k)) == 0; // keeps [lo, mid)
    if (lower) out.push_back({partner, halving_tag + k, mid, hi, lo, mid, true});
    else out.push_back({partner, halving_tag + k, lo, mid, mid, hi, true});
    kept.push_back(lower ? std::pair{lo, mid} : std::pair{mid, hi});
  }
  // 3: recursive doubling: give the partner what this rank summed, take what it summed
  for (int k = steps - 1; k >= 0; --k) {
    const auto [mine_lo, mine_hi] = kept[static_cast<std::size_t>(k + 1)];
    const auto [lo, hi] = kept[static_cast<std::size_t>(k)];
    const int partner = l.participant[static_cast<std::size_t>(v ^ (1 << k))];
    const bool lower = mine_lo == lo;
    out.push_back({partner, doubling_tag + k, mine_lo, mine_hi, lower ? mine_hi : lo, lower ? hi : mine_lo, false});
  }
  if (pair >= 0) out.push_back({pair, post_tag, 0, n, 0, 0, false});
  return out;
}

} // namespace headgrad::distributed
