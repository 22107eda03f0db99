// tree_allreduce.hpp - the messages of an all-reduce whose sum is, for every element, the shard
// tree's (shard_tree.hpp): Rabenseifner's algorithm with fixed partners (Thakur, Rabenseifner and
// Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005, section
// 4.4), as a schedule of exchanges that communicator_mpi.cpp carries out and the tests replay
// without MPI.
//
// Every rank starts with the sum of its node's shards (rank_layout) over n elements.
//  1. The two ranks of each split node: the right one sends its n elements to the left one, which
//     adds them - now p = 2^floor(log2 N) ranks hold the p nodes at depth log2 p.
//  2. Reduce-scatter by recursive halving, partners at distance 1, 2, 4, ... among those p: at
//     step k, virtual ranks v and v ^ 2^k (sibling subtrees of the tree) split the elements they
//     share in two, each sends the half it gives up and adds the partner's copy of the half it
//     keeps. After log2 p steps each holds n / p elements summed over every shard, each element
//     through the tree's additions and no others.
//  3. All-gather by recursive doubling in the reverse order (copies, no arithmetic).
//  4. The left rank of each split node sends the result to the right one.
// Per rank: 2 log2 p (+ 2 with a pair) messages, about 2 n (+ 2 n) elements sent.
#pragma once
#include <cstdint>
#include <vector>

namespace headgrad::distributed {

// One exchange with one partner: send elements [send_first, send_end) of the buffer and receive
// [recv_first, recv_end) (either may be empty), adding what arrives (add) or storing it. Messages
// carry `tag`, the same for both sides of an exchange.
struct Exchange {
  int partner = 0;
  int tag = 0;
  std::int64_t send_first = 0, send_end = 0;
  std::int64_t recv_first = 0, recv_end = 0;
  bool add = false;
};

// Rank `rank`'s exchanges, in order, for an all-reduce over `n` elements of a job of `ranks`
// ranks whose shards are spread as rank_layout(shards, ranks) spreads them. Empty for one rank.
std::vector<Exchange> tree_allreduce_schedule(std::int64_t shards, int ranks, int rank, std::int64_t n);

} // namespace headgrad::distributed
