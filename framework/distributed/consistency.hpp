// consistency.hpp - the ranks of a job agreeing: on whether a step that can fail on some of them
// failed, on settings, on a parameter list and on parameter values (bitwise, by checksums).
//
// Collectives (communicator.hpp): every rank calls them in the same order.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad::distributed {

// An error every rank of the job raises alike, with the same message: each rank can end cleanly,
// and rank 0 alone reports it (instead of one rank ending the job with MPI_Abort).
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `f` (which must call no collective) on every rank. If it throws on any rank, every rank
// throws CollectiveError with the message of the lowest such rank. In a job of one, f's own
// exception comes through unchanged.
void agree(const std::function<void()>& f);

// A named value that is not the same on every rank: rank `rank` has `value` where rank 0 has
// `root_value`.
struct Difference {
  std::string name;
  int rank = 0;
  std::string value, root_value;
};
// The first entry (in list order, then rank order) in which a rank's list differs from rank 0's,
// by name or value; lists of different lengths differ at the first missing entry (its value
// "(missing)"). One allgather.
std::optional<Difference> first_difference(const std::vector<std::pair<std::string, std::string>>& named_values);

// A 64-bit checksum of t's bytes in logical order: equal for bitwise-equal tensors, and for
// different ones only by a 2^-64 accident. ~1 ms for 6 MB.
std::uint64_t checksum(const Tensor& t);
// Each tensor's checksum under its name (as hex), for first_difference: the first tensor that is
// not bitwise the same on every rank.
std::vector<std::pair<std::string, std::string>> checksums(const NamedTensors& tensors);
// Each tensor's name with its shape and dtype ("'blks.0.ffn.dense1.weight' [64, 128] float32") under
// its position ("parameter 7"), for first_difference: a list that is not the same on every rank.
std::vector<std::pair<std::string, std::string>> descriptions(const NamedTensors& tensors);

} // namespace headgrad::distributed
