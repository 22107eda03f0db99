// allreduce_bench.cpp - the gradient all-reduce alone, A/B in one job: headgrad's tree all-reduce
// (the shard tree's order, framework/distributed/tree_allreduce.hpp) against MPI_Iallreduce (what
// headgrad used before; the MPI library picks its algorithm and order), on the buckets of a model
// of the benchmark's (bench/distributed.sh runs it): the large config by default.
//
//   mpirun -np 2 build/headgrad_allreduce_bench [ROUNDS] [d_model ffn layers max_len]
//
// Each round times one pass over all buckets (as one training step sends them, without backward
// to overlap) with each method, alternating which goes first; rank 0 prints the median and the
// best ms per pass of each, their ratio, the bytes per pass, and the largest relative difference
// between the two sums (rounding only: they add in other orders).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mpi.h>
#include <string>
#include <thread>
#include <vector>

#include "framework/distributed/bucketed_allreduce.hpp"
#include "framework/distributed/communicator.hpp"
#include "framework/engine/runtime/clock.hpp"
#include "models/transformer.hpp"

using namespace headgrad;

namespace {

// MPI_Iallreduce waited for as headgrad's collectives wait (MPI_Test with yields, then sleeps of 50 us)
void mpi_allreduce(float* data, int n) {
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
  const double spin_until = runtime::seconds_now() + 300e-6;
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (runtime::seconds_now() < spin_until) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  distributed::Session mpi(argc, argv);
  const int rounds = argc > 1 ? std::stoi(argv[1]) : 30;
  models::ModelConfig cfg;
  cfg.vocab = 16;
  cfg.d_model = argc > 5 ? std::stoll(argv[2]) : 256;
  cfg.heads = 8;
  cfg.ffn = argc > 5 ? std::stoll(argv[3]) : 1024;
  cfg.layers = argc > 5 ? std::stoll(argv[4]) : 2;
  cfg.max_len = argc > 5 ? std::stoll(argv[5]) : 128;
  models::SequenceModel model(cfg, 0);
  const NamedTensors params = model.named_parameters();
  std::vector<std::vector<float>> buckets;
  for (const auto& b : distributed::plan_buckets(params, distributed::kDefaultBucketBytes)) {
    std::int64_t n = 0;
    for (std::size_t i : b) n += params[i].second.numel();
    buckets.emplace_back(static_cast<std::size_t>(n + static_cast<std::int64_t>(b.size()))); // + the flags
  }
  // values of this rank's own (a gradient-like spread of magnitudes)
  auto fill = [&](std::vector<std::vector<float>>& bs) {
    unsigned x = 12345u + 777u * static_cast<unsigned>(distributed::rank());
    for (auto& b : bs)
      for (float& v : b) {
        x = x * 1664525u + 1013904223u;
        v = std::ldexp(static_cast<float>(x >> 8) / 16777216.0f - 0.5f, static_cast<int>(x % 16) - 12);
      }
  };
  std::vector<double> tree_ms, mpi_ms;
  double max_rel = 0;
  std::int64_t bytes = 0;
  for (const auto& b : buckets) bytes += static_cast<std::int64_t>(b.size() * sizeof(float));
  for (int r = 0; r < rounds + 2; ++r) { // the first two warm up
    std::vector<std::vector<float>> a = buckets, m = buckets;
    fill(a);
    fill(m);
    for (int k = 0; k < 2; ++k) {
      const bool tree_first = (r + k) % 2 == 0;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = runtime::seconds_now();
      for (auto& b : tree_first ? a : m) {
        if (tree_first) distributed::allreduce_sum(b.data(), static_cast<std::int64_t>(b.size()));
        else mpi_allreduce(b.data(), static_cast<int>(b.size()));
      }
      const double ms = (runtime::seconds_now() - t0) * 1e3;
      if (r >= 2) (tree_first ? tree_ms : mpi_ms).push_back(ms);
      // the other method next in this round: swap roles by running the remaining one
      MPI_Barrier(MPI_COMM_WORLD);
      const double t1 = runtime::seconds_now();
      for (auto& b : tree_first ? m : a) {
        if (tree_first) mpi_allreduce(b.data(), static_cast<int>(b.size()));
        else distributed::allreduce_sum(b.data(), static_cast<std::int64_t>(b.size()));
      }
      const double ms2 = (runtime::seconds_now() - t1) * 1e3;
      if (r >= 2) (tree_first ? mpi_ms : tree_ms).push_back(ms2);
      if (k == 0)
        for (std::size_t i = 0; i < a.size(); ++i)
          for (std::size_t j = 0; j < a[i].size(); ++j)
            max_rel = std::max(max_rel, std::abs(static_cast<double>(a[i][j]) - m[i][j]) /
                                            std::max(1e-30, std::abs(static_cast<double>(m[i][j]))));
      fill(a); // fresh inputs for the second half of the round
      fill(m);
    }
  }
  if (distributed::rank() == 0) {
    const double t = median(tree_ms), m = median(mpi_ms);
    std::printf("%d ranks, %zu buckets, %.2f MB per pass, %zu passes each\n", distributed::size(), buckets.size(),
                static_cast<double>(bytes) / 1e6, tree_ms.size());
    std::printf("tree all-reduce   median %8.3f ms  best %8.3f ms\n", t, *std::min_element(tree_ms.begin(), tree_ms.end()));
    std::printf("MPI_Iallreduce    median %8.3f ms  best %8.3f ms\n", m, *std::min_element(mpi_ms.begin(), mpi_ms.end()));
    std::printf("tree / MPI: %.2f (median); largest relative difference of the sums %.2g\n", t / m, max_rel);
  }
  return 0;
}
