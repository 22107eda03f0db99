// communicator_mpi.cpp - communicator.hpp on MPI (compiled when CMake found MPI).
#include "framework/distributed/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <limits>
#include <mpi.h>
#include <stdexcept>
#include <thread>

#include "framework/distributed/tree_allreduce.hpp"
#include "framework/engine/runtime/clock.hpp"

namespace headgrad::distributed {
namespace {

struct Job {
  bool running = false; // a Session started MPI or found it started
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm control = MPI_COMM_NULL; // "are you there?" messages of a rank that waited too long
  int rank = 0, size = 1, local_size = 1;
};
Job g_job;
double g_rank_timeout = 0; // seconds; 0: wait forever


constexpr int kPingTag = 1, kPongTag = 2, kHeartbeatTag = 3;
int g_ping_payload = 0; // what pings and pongs carry (nothing): static, as their sends outlive the call
double g_last_heartbeat = -std::numeric_limits<double>::infinity(); // when this rank last sent one

// Receives every heartbeat that has arrived; true if there was one (a rank it may wait for works).
bool heard_heartbeats() {
  bool heard = false;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kHeartbeatTag, g_job.control, &arrived, &status);
    if (!arrived) return heard;
    int payload = 0;
    MPI_Recv(&payload, 1, MPI_INT, status.MPI_SOURCE, kHeartbeatTag, g_job.control, MPI_STATUS_IGNORE);
    heard = true;
  }
}

// Answers every ping that has arrived: a rank that waited rank_timeout() asks who is alive. Every
// wait loop calls it, so a rank that waits in any collective answers within microseconds.
void answer_pings() {
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, g_job.control, &arrived, &status);
    if (!arrived) return;
    int payload = 0;
    MPI_Recv(&payload, 1, MPI_INT, status.MPI_SOURCE, kPingTag, g_job.control, MPI_STATUS_IGNORE);
    MPI_Request pong;
    MPI_Isend(&g_ping_payload, 1, MPI_INT, status.MPI_SOURCE, kPongTag, g_job.control, &pong);
    MPI_Request_free(&pong); // completes on its own
  }
}

// "rank 1", "ranks 1 and 3", "ranks 1, 2 and 5"
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i)
    s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return s;
}

struct Survey {
  std::vector<int> silent; // ranks that did not answer within the grace period
  int reporter = 0;        // the lowest rank that did (this one included)
};

// Asks every other rank whether it is alive and waits `grace` seconds for the answers.
Survey ask_every_rank(double grace) {
  const auto n = static_cast<std::size_t>(g_job.size);
  static std::vector<int> answers; // receive buffers that outlive a cancelled receive
  answers.assign(n, 0);
  std::vector<MPI_Request> pongs(n, MPI_REQUEST_NULL);
  for (int r = 0; r < g_job.size; ++r) {
    if (r == g_job.rank) continue;
    MPI_Request ping;
    MPI_Isend(&g_ping_payload, 1, MPI_INT, r, kPingTag, g_job.control, &ping);
    MPI_Request_free(&ping); // a stalled rank never takes it: nobody waits for this send
    MPI_Irecv(&answers[static_cast<std::size_t>(r)], 1, MPI_INT, r, kPongTag, g_job.control, &pongs[static_cast<std::size_t>(r)]);
  }
  std::vector<char> answered(n, 0);
  answered[static_cast<std::size_t>(g_job.rank)] = 1;
  const double until = runtime::seconds_now() + grace;
  for (std::size_t missing = n - 1; missing > 0 && runtime::seconds_now() < until;) {
    for (std::size_t r = 0; r < n; ++r) {
      if (answered[r]) continue;
      int done = 0;
      MPI_Test(&pongs[r], &done, MPI_STATUS_IGNORE);
      if (done) answered[r] = 1, --missing;
    }
    answer_pings(); // the others may be asking too
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Survey s;
  s.reporter = g_job.rank;
  for (int r = g_job.size - 1; r >= 0; --r) {
    const auto i = static_cast<std::size_t>(r);
    if (!answered[i]) {
      MPI_Cancel(&pongs[i]);
      MPI_Wait(&pongs[i], MPI_STATUS_IGNORE);
      s.silent.insert(s.silent.begin(), r);
    } else {
      s.reporter = r;
    }
  }
  return s;
}

// Waits for `count` requests by polling: a few hundred microseconds of MPI_Test and yield (a reply
// that is on its way arrives fastest so), then MPI_Test every 50 us. Open MPI moves a
// non-blocking operation on only inside MPI calls, so the polling is also what progresses it.
// After rank_timeout() it asks who is alive: the lowest rank that is throws RankTimeout naming
// the silent ones; another waits once more as long (that rank ends the job) before it throws too.
// A rank that was itself stopped (a gap between two polls) starts its wait again: the time it
// did not run is not the others' fault (Open MPI continues a stopped rank to end the job). So does
// a rank that hears a heartbeat (another rank works, e.g. rank 0 evaluating): the timeout measures
// how long the ranks waited for have been silent, not how long the collective took.
void wait_all(MPI_Request* requests, int count) {
  const double start = runtime::seconds_now(), timeout = g_rank_timeout;
  const double spin_until = start + 300e-6, pause = std::min(1.0, timeout / 2);
  double deadline = timeout > 0 ? start + timeout : std::numeric_limits<double>::infinity();
  double last = start;
  std::string asked; // the survey's message, once taken
  std::vector<int> silent;
  for (;;) {
    int done = 0;
    MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    answer_pings();
    const double t = runtime::seconds_now();
    if (timeout > 0 && t - last > pause) deadline = std::max(deadline, t + timeout); // this rank did not run
    if (heard_heartbeats() && timeout > 0) deadline = std::max(deadline, t + timeout); // a rank is working
    last = t;
    if (t >= deadline) {
      if (!asked.empty()) throw RankTimeout(asked, silent);
      const Survey s = ask_every_rank(std::clamp(timeout / 4, 0.5, 5.0));
      silent = s.silent;
      asked = s.silent.empty()
                  ? fmt::format("a collective waited {} s (the rank timeout): every rank answers, but not all of them "
                                "are in this collective (one is stuck elsewhere, or the ranks called different ones)",
                                timeout)
                  : fmt::format("a collective waited {} s (the rank timeout) for the other ranks: {} did not answer "
                                "(stopped, hung or cut off)",
                                timeout, rank_list(s.silent));
      if (s.reporter == g_job.rank) throw RankTimeout(asked, silent);
      deadline = runtime::seconds_now() + timeout;
    }
    if (t < spin_until) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void wait_one(MPI_Request& request) { wait_all(&request, 1); }

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
    wait_one(request);
  }
}

// The sum over the shard tree: tree_allreduce_schedule's exchanges, in pieces of at most 2^28
// elements (MPI counts are ints), each piece with the same tree.
template <typename T> void tree_allreduce(T* data, std::int64_t n, std::int64_t shards, MPI_Datatype type) {
  if (shards < g_job.size)
    throw std::invalid_argument(fmt::format("allreduce_sum: {} shards over {} ranks (every rank needs one)", shards, g_job.size));
  if (g_job.size == 1 || n == 0) return;
  constexpr std::int64_t kMaxCount = std::int64_t{1} << 28;
  thread_local std::vector<T> received; // what an adding exchange receives, before it is added
  for (std::int64_t first = 0; first < n; first += kMaxCount) {
    const std::int64_t len = std::min(kMaxCount, n - first);
    T* x = data + first;
    for (const Exchange& e : tree_allreduce_schedule(shards, g_job.size, g_job.rank, len)) {
      const std::int64_t recv_n = e.recv_end - e.recv_first, send_n = e.send_end - e.send_first;
      MPI_Request requests[2];
      int count = 0;
      if (recv_n > 0) {
        if (e.add && static_cast<std::int64_t>(received.size()) < recv_n) received.resize(static_cast<std::size_t>(recv_n));
        T* into = e.add ? received.data() : x + e.recv_first;
        MPI_Irecv(into, static_cast<int>(recv_n), type, e.partner, e.tag, g_job.comm, &requests[count++]);
      }
      if (send_n > 0)
        MPI_Isend(x + e.send_first, static_cast<int>(send_n), type, e.partner, e.tag, g_job.comm, &requests[count++]);
      wait_all(requests, count);
      if (e.add)
        for (std::int64_t i = 0; i < recv_n; ++i) x[e.recv_first + i] += received[static_cast<std::size_t>(i)];
    }
  }
}

} // namespace

// What a link of headgrad::distributed asks for first (--undefined, in CMakeLists.txt): it takes
// this file's object, and with it this communicator, before libheadgrad.a's single-process one.
extern "C" const int headgrad_mpi_communicator = 1;

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
  MPI_Comm_dup(MPI_COMM_WORLD, &g_job.control);
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
  heard_heartbeats(); // the last ones, received before the communicator goes
  MPI_Comm_free(&g_job.comm);
  MPI_Comm_free(&g_job.control);
  g_job = Job{};
  if (started_mpi_) MPI_Finalize();
}

int rank() { return g_job.rank; }
int size() { return g_job.size; }
int local_size() { return g_job.local_size; }

void allreduce_sum(float* data, std::int64_t n, std::int64_t shards) { tree_allreduce(data, n, shards, MPI_FLOAT); }
void allreduce_sum(double* data, std::int64_t n, std::int64_t shards) { tree_allreduce(data, n, shards, MPI_DOUBLE); }
void allreduce_sum(float* data, std::int64_t n) { tree_allreduce(data, n, g_job.size, MPI_FLOAT); }
void allreduce_sum(double* data, std::int64_t n) { tree_allreduce(data, n, g_job.size, MPI_DOUBLE); }

void set_rank_timeout(double seconds) {
  if (!(seconds >= 0)) throw std::invalid_argument(fmt::format("set_rank_timeout: {} s is not a duration", seconds));
  g_rank_timeout = seconds;
}
double rank_timeout() { return g_rank_timeout; }

void heartbeat() {
  if (!g_job.running || g_job.size == 1 || g_rank_timeout <= 0) return;
  const double now = runtime::seconds_now();
  if (now - g_last_heartbeat < std::min(1.0, g_rank_timeout / 4)) return;
  g_last_heartbeat = now;
  for (int r = 0; r < g_job.size; ++r) {
    if (r == g_job.rank) continue;
    MPI_Request beat;
    MPI_Isend(&g_ping_payload, 1, MPI_INT, r, kHeartbeatTag, g_job.control, &beat);
    MPI_Request_free(&beat); // a few bytes, sent eagerly; a stopped rank need not take it
  }
  answer_pings(); // a rank that waited long enough to ask is answered too
}

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
    wait_one(request);
  }
}

std::vector<std::string> allgather(const std::string& text) {
  if (g_job.size == 1) return {text};
  const auto n = static_cast<std::size_t>(g_job.size);
  std::vector<int> lengths(n), offsets(n);
  int mine = static_cast<int>(text.size());
  MPI_Request request;
  MPI_Iallgather(&mine, 1, MPI_INT, lengths.data(), 1, MPI_INT, g_job.comm, &request);
  wait_one(request);
  int total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Iallgatherv(text.data(), mine, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, g_job.comm,
                  &request);
  wait_one(request);
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
