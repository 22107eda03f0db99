// communicator_single.cpp - communicator.hpp in a build without MPI: every job is this process
// alone, rank 0 of 1, and a collective over the one rank returns its input.
#include "framework/distributed/communicator.hpp"

#include <cstdlib>
#include <fmt/format.h>
#include <stdexcept>

namespace headgrad::distributed {
namespace {

// The rank count a launcher announces, 0 when none does.
long launcher_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* v = std::getenv(name)) return std::atol(v);
  return 0;
}

} // namespace

bool built_with_mpi() { return false; }
std::string mpi_library_version() { return ""; }

bool started_by_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}

Session::Session(int&, char**&) {
  // Several copies of a single-process build would each train the whole batch on their own.
  if (const long n = launcher_ranks(); started_by_launcher() && n > 1)
    throw std::runtime_error(fmt::format("started as one of {} MPI ranks, but this headgrad was built without MPI "
                                         "(install libopenmpi-dev and rebuild: ./dev.sh build)",
                                         n));
}
Session::~Session() = default;

int rank() { return 0; }
int size() { return 1; }
int local_size() { return 1; }

void allreduce_sum(float*, std::int64_t) {}
void allreduce_sum(double*, std::int64_t) {}
void allreduce_sum(float*, std::int64_t, std::int64_t shards) {
  if (shards < 1) throw std::invalid_argument(fmt::format("allreduce_sum: {} shards over 1 rank (it needs one)", shards));
}
void allreduce_sum(double*, std::int64_t, std::int64_t shards) {
  if (shards < 1) throw std::invalid_argument(fmt::format("allreduce_sum: {} shards over 1 rank (it needs one)", shards));
}

namespace {
double g_rank_timeout = 0;
}
void set_rank_timeout(double seconds) {
  if (!(seconds >= 0)) throw std::invalid_argument(fmt::format("set_rank_timeout: {} s is not a duration", seconds));
  g_rank_timeout = seconds;
}
double rank_timeout() { return g_rank_timeout; }
void heartbeat() {} // a job of one: nobody waits
std::int64_t allreduce_max(std::int64_t value) { return value; }
std::int64_t allreduce_min(std::int64_t value) { return value; }
void broadcast(void*, std::size_t, int) {}
std::vector<std::string> allgather(const std::string& text) { return {text}; }

void abort_job(int code) { std::exit(code); }

} // namespace headgrad::distributed
