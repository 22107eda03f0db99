// A program that does something before runtime::configure, as a host program might: it appends a
// line to the file argv[1] (so a re-execution shows as a second line) and prints one on stdout
// without flushing it. argv[2] = "no-reexec" passes StartupOptions{.reexec = false}.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "framework/engine/runtime/startup.hpp"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (FILE* f = std::fopen(argv[1], "a")) {
    std::fputs("started\n", f);
    std::fclose(f);
  }
  std::printf("before configure\n"); // stays in stdout's buffer when stdout is a file or a pipe
  const bool reexec = !(argc > 2 && std::string(argv[2]) == "no-reexec");
  headgrad::runtime::configure(argc, argv, {.reexec = reexec});
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("after configure: OMP_WAIT_POLICY=%s\n", policy ? policy : "");
  return 0;
}
