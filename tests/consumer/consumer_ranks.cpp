// Built on headgrad::distributed: the communicator on MPI when headgrad was built with it. Started
// without a launcher it is a job of one (MPI not even started); it prints what it was built with.
#include <cstdio>

#include <headgrad/framework/distributed/communicator.hpp>

int main(int argc, char** argv) {
  headgrad::distributed::Session session(argc, argv);
  std::printf("consumer_ranks: built with MPI: %s; rank %d of %d\n", headgrad::distributed::built_with_mpi() ? "yes" : "no",
              headgrad::distributed::rank(), headgrad::distributed::size());
  return headgrad::distributed::size() == 1 ? 0 : 1;
}
