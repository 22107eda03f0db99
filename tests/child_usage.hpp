// child_usage.hpp - running the headgrad binary (HEADGRAD_CLI) as a child and reading what it
// used: its peak resident memory (ru_maxrss from wait4) besides its exit code and output. A
// memory bound is tested this way, on a process of its own, never on the test process (whose
// peak includes every case before it).
//
// Every child runs under an address-space limit (RLIMIT_AS, 8 GiB by default), so that a bound
// that fails - a regression, or the code from before a fix - ends the child with bad_alloc
// instead of taking the machine's memory.
//
// On Linux a child's ru_maxrss is at least the resident size of the process it was forked from:
// exec records the peak of the address space it replaces, the parent's copy (fs/exec.c,
// exec_mmap: setmax_mm_hiwater_rss). So the parent must be small when it forks, or a child's peak
// would read as the parent's size: run() returns freed heap memory first (malloc_trim) and
// refuses to measure from a parent of more than kMaxParentKiB resident (free big buffers, such as
// a corpus written for the child, before running it).
#pragma once
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <malloc.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/test_support.hpp"

namespace child_usage {

struct Usage {
  int rc = -1;                 // exit code, or -signal
  std::string out, err;
  long max_rss_kib = 0;        // peak resident set size
  std::vector<std::string> err_lines() const { return test_support::CliRun{rc, out, err}.err_lines(); }
};

inline constexpr long kMaxParentKiB = 64 * 1024;

// Under AddressSanitizer a process's memory is not its own program's (shadow memory, redzones, a
// quarantine of freed blocks that grows to 256 MB), and ASan needs a huge address space: there the
// children run without the address-space limit and the tests check what they print, not their
// peak memory (the normal build measures it).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kMeasuresMemory = false;
#else
inline constexpr bool kMeasuresMemory = true;
#endif

// This process's resident size now (/proc/self/statm), in KiB.
inline long resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

#ifdef HEADGRAD_CLI
// Runs `headgrad args...` in `cwd` and waits for it (killed, and the check failed, after
// timeout_s).
inline Usage run(const std::vector<std::string>& args, const std::string& cwd, double timeout_s = 120,
                 rlim_t address_space = rlim_t{8} << 30) {
  static int n = 0;
  const std::string out_path = cwd + "/usage" + std::to_string(n) + ".out";
  const std::string err_path = cwd + "/usage" + std::to_string(n) + ".err";
  ++n;
  std::vector<std::string> all = {HEADGRAD_CLI};
  all.insert(all.end(), args.begin(), args.end());
  malloc_trim(0);
  const long parent = resident_kib();
  REQUIRE_MESSAGE((!kMeasuresMemory || parent < kMaxParentKiB), "the test process holds ", parent,
                  " KiB: a child's peak memory would read as at least that much");
  const pid_t pid = test_support::spawn(all, out_path, err_path, cwd, {}, [address_space] {
    const rlimit limit{address_space, address_space};
    if (kMeasuresMemory) setrlimit(RLIMIT_AS, &limit);
  });
  Usage u;
  int status = 0;
  rusage ru{};
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (wait4(pid, &status, WNOHANG, &ru) != pid) {
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      FAIL_CHECK("the child did not exit within ", timeout_s, " s: headgrad ", args.empty() ? "" : args[0]);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  u.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  u.max_rss_kib = ru.ru_maxrss;
  u.out = test_support::read_file(out_path);
  u.err = test_support::read_file(err_path);
  return u;
}
#endif

} // namespace child_usage
