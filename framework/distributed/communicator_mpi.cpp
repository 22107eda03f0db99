// communicator_mpi.cpp - communicator.hpp on MPI (compiled when CMake found MPI).
#include "framework/distributed/communicator.hpp"

#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <mpi.h>
#include <stdexcept>
#include <thread>

namespace headgrad::distributed {
namespace {

struct Job {
  bool running = false; // a Session started MPI or found it started
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1, local_size = 1;
};
Job g_job;

// Waits for `request` by polling: a few hundred microseconds of MPI_Test and yield (a reply that
// is on its way arrives fastest so), then MPI_Test every 50 us. Open MPI moves a non-blocking
// collective on only inside MPI calls, so the polling is also what progresses it.
void wait_politely(MPI_Request& request) {
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + std::chrono::microseconds(300);
  int done = 0;
  for (;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (Clock::now() < spin_until) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void allreduce(void* data, std::int64_t n, MPI_Datatype type, MPI_Op op) {
  if (g_job.size == 1 || n == 0) return; // (also without a session: a job of one)
  // MPI counts are ints: reduce larger arrays in pieces
  constexpr std::int64_t kMaxCount = 1 << 30;
  int type_size = 0;
  MPI_Type_size(type, &type_size);
  for (std::int64_t first = 0; first < n; first += kMaxCount) {
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + first * type_size,
                   static_cast<int>(std::min(kMaxCount, n - first)), type, op, g_job.comm, &request);
    wait_politely(request);
  }
}

} // namespace

bool built_with_mpi() { return true; }

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<std::size_t>(len));
  const auto end = s.find_first_of(",\n"); // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
  return s.substr(0, end);
}

bool started_by_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
}

Session::Session(int& argc, char**& argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && !started_by_launcher()) return; // a job of one, without MPI
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    started_mpi_ = true;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (started_mpi_) MPI_Finalize();
    started_mpi_ = false;
    throw std::runtime_error(
        "MPI: the library does not allow calls from other threads than the main one (MPI_THREAD_SERIALIZED), which "
        "the gradient all-reduce needs");
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &g_job.comm);
  MPI_Comm_rank(g_job.comm, &g_job.rank);
  MPI_Comm_size(g_job.comm, &g_job.size);
  MPI_Comm local;
  MPI_Comm_split_type(g_job.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &g_job.local_size);
  MPI_Comm_free(&local);
  g_job.running = true;
}

Session::~Session() {
  if (!g_job.running) return;
  MPI_Comm_free(&g_job.comm);
  g_job = Job{};
  if (started_mpi_) MPI_Finalize();
}

int rank() { return g_job.rank; }
int size() { return g_job.size; }
int local_size() { return g_job.local_size; }

void allreduce_sum(float* data, std::int64_t n) { allreduce(data, n, MPI_FLOAT, MPI_SUM); }
void allreduce_sum(double* data, std::int64_t n) { allreduce(data, n, MPI_DOUBLE, MPI_SUM); }

std::int64_t allreduce_max(std::int64_t value) {
  allreduce(&value, 1, MPI_INT64_T, MPI_MAX);
  return value;
}

std::int64_t allreduce_min(std::int64_t value) {
  allreduce(&value, 1, MPI_INT64_T, MPI_MIN);
  return value;
}

void broadcast(void* data, std::size_t bytes, int root) {
  if (g_job.size == 1 || bytes == 0) return;
  constexpr std::size_t kMaxCount = std::size_t{1} << 30;
  for (std::size_t first = 0; first < bytes; first += kMaxCount) {
    MPI_Request request;
    MPI_Ibcast(static_cast<char*>(data) + first, static_cast<int>(std::min(kMaxCount, bytes - first)), MPI_BYTE, root,
               g_job.comm, &request);
    wait_politely(request);
  }
}

std::vector<std::string> allgather(const std::string& text) {
  if (g_job.size == 1) return {text};
  const auto n = static_cast<std::size_t>(g_job.size);
  std::vector<int> lengths(n), offsets(n);
  int mine = static_cast<int>(text.size());
  MPI_Request request;
  MPI_Iallgather(&mine, 1, MPI_INT, lengths.data(), 1, MPI_INT, g_job.comm, &request);
  wait_politely(request);
  int total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Iallgatherv(text.data(), mine, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, g_job.comm,
                  &request);
  wait_politely(request);
  std::vector<std::string> out;
  for (std::size_t r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return out;
}

void abort_job(int code) {
  if (g_job.running) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

} // namespace headgrad::distributed
