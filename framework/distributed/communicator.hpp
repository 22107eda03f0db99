// communicator.hpp - the processes of a data-parallel job: starting and ending MPI, this
// process's rank and the job's size, and the few collectives training needs (sums, a broadcast,
// text gathered from every rank).
//
// Two implementations: communicator_single.cpp, in the headgrad library, and communicator_mpi.cpp
// on MPI (Open MPI on Debian), in headgrad_distributed (headgrad::distributed), which a program
// links to run on ranks (a build without MPI makes that target the headgrad library). Either way a
// process that no MPI launcher (mpirun, srun) started is a job of one: rank 0 of 1, every
// collective over the one rank returns its input, and MPI is not even started (MPI_Init alone
// takes most of a second).
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace headgrad::distributed {

bool built_with_mpi();
// The MPI library's version line (MPI_Get_library_version), "" without MPI support.
std::string mpi_library_version();
// True when an MPI launcher started this process: mpirun/mpiexec (OMPI_COMM_WORLD_SIZE, or
// PMI_RANK for MPICH's hydra) or a PMIx launcher such as srun --mpi=pmix (PMIX_RANK).
bool started_by_launcher();

// The MPI session of a program: constructed first thing in main(), it starts MPI when a launcher
// started the process (unless the program started MPI itself; then it is used as it is), and ends
// it at scope exit. The collectives below use a duplicate of MPI_COMM_WORLD, so they never match
// messages of the program's own.
// MPI must allow calls from any one thread at a time (MPI_THREAD_SERIALIZED): the gradient
// all-reduce runs on a thread of its own. std::runtime_error when the library cannot, or when a
// launcher started several ranks of a build without MPI support.
class Session {
public:
  Session(int& argc, char**& argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

private:
  bool started_mpi_ = false;
};

int rank();       // 0 .. size() - 1; 0 without a session
int size();       // ranks in the job; 1 without a session
int local_size(); // ranks on this machine (sharing its memory), this one included

// Collectives: every rank calls them in the same order with the same counts. Each waits by
// polling with short sleeps instead of spinning, so a rank waiting for a slower one leaves the
// cores to the compute it shares them with, and gives up after rank_timeout(). Calls from two
// threads at once are not allowed.
//
// Sums with the bits of the shard tree (shard_tree.hpp): every rank holds the sum of its node of
// the tree over `shards` shards (rank_shards(shards, size(), rank())), and afterwards every rank
// holds the sum over all shards, each element added in the tree's order (Rabenseifner's
// all-reduce, tree_allreduce.hpp) - not MPI_Allreduce, whose order the MPI standard leaves to the
// library. shards >= size(); std::invalid_argument otherwise.
void allreduce_sum(float* data, std::int64_t n, std::int64_t shards);
void allreduce_sum(double* data, std::int64_t n, std::int64_t shards);
// The same with one shard per rank (shards = size()): rank r's values are shard r.
void allreduce_sum(float* data, std::int64_t n);
void allreduce_sum(double* data, std::int64_t n);
std::int64_t allreduce_max(std::int64_t value);
std::int64_t allreduce_min(std::int64_t value);
void broadcast(void* data, std::size_t bytes, int root = 0);
// Every rank's `text`, in rank order, on every rank.
std::vector<std::string> allgather(const std::string& text);

// How long a collective waits for the other ranks before it gives up (seconds; 0, the default
// of a program that never sets it: forever). A rank that stops answering - stopped (SIGSTOP),
// hung, or cut off - would otherwise keep every other rank waiting for good. What it measures is
// silence, not work: the wait starts again whenever a rank it waits for sends a heartbeat().
void set_rank_timeout(double seconds);
double rank_timeout();

// A sign of life from a rank that works outside the collectives while the others wait for it (rank
// 0 evaluating or saving): a small message to every other rank, at most one per
// min(1 s, rank_timeout() / 4) (more frequent calls return at once), on which a waiting rank starts
// its rank_timeout() wait again. It also answers a waiting rank's "are you there?". Call it between
// pieces of the work, each much shorter than the timeout: a rank that stops (SIGSTOP) or hangs in
// a piece sends nothing and is still found. A no-op in a job of one or without a timeout.
void heartbeat();

// What a collective throws once it has waited rank_timeout(): it then asks every rank whether it
// is alive (a message each waiting rank answers), and names those that did not answer. Only the
// lowest-numbered rank that answered throws at once (so that one rank reports it); the others
// throw after waiting that long once more. The job cannot go on: end it with abort_job.
struct RankTimeout : std::runtime_error {
  RankTimeout(const std::string& what, std::vector<int> silent_ranks)
      : std::runtime_error(what), silent(std::move(silent_ranks)) {}
  std::vector<int> silent; // the ranks that did not answer (empty: all did, yet the collective hung)
};

// Ends every rank of the job with exit code `code` (MPI_Abort): the way out when this rank cannot
// go on and the others would wait for it forever.
[[noreturn]] void abort_job(int code);

} // namespace headgrad::distributed
