// kill_and_resume TRAINER WORKDIR: runs `TRAINER WORKDIR/whole 600 1` to the end; then
// `TRAINER WORKDIR/killed 600 2`, killed with SIGKILL at three moments of the run and started again
// each time (continuing the checkpoint), then let finish.
// Exit 0 when the last line both runs print is the same (same step, same parameter bits).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;

// Starts TRAINER DIR STEPS THREADS with stdout to OUT; returns its pid.
pid_t start(const std::string& trainer, const std::string& dir, const char* threads, const std::string& out) {
  std::fflush(stdout); // or the child would write the parent's buffered lines again
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen(out.c_str(), "w", stdout);
    execl(trainer.c_str(), trainer.c_str(), dir.c_str(), "600", threads, static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The last complete line of a file ("" if none).
std::string last_row(const std::string& path) {
  const std::string text = read(path);
  const std::size_t end = text.rfind('\n');
  if (end == std::string::npos || end == 0) return "";
  const std::size_t begin = text.rfind('\n', end - 1);
  return begin == std::string::npos ? "" : text.substr(begin + 1, end - begin - 1);
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string trainer = argv[1], work = argv[2];
  fs::remove_all(work);
  fs::create_directories(work);
  int status = 0;
  waitpid(start(trainer, work + "/whole", "1", work + "/whole.txt"), &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::fprintf(stderr, "the uninterrupted run failed\n"), 1;
  const std::string whole = read(work + "/whole.txt");

  const std::string dir = work + "/killed";
  // Killed once its log has reached step 100, 250 and 400, a few milliseconds later: every few
  // steps is a checkpoint (fsync'd), so the kills land in a step or in a save.
  const std::pair<long, int> kills[] = {{100, 0}, {250, 3}, {400, 7}};
  for (const auto& [at_step, extra_ms] : kills) {
    const pid_t pid = start(trainer, dir, "2", work + "/killed.txt");
    std::string row;
    while (std::atol(row.c_str()) < at_step && waitpid(pid, &status, WNOHANG) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      row = last_row(dir + "/metrics.csv");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(extra_ms));
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
      return std::fprintf(stderr, "the run ended before it was killed: %s", read(work + "/killed.txt").c_str()), 1;
    std::printf("killed with SIGKILL %d ms after metrics.csv showed step %ld ('%s')\n", extra_ms, at_step, row.c_str());
  }
  waitpid(start(trainer, dir, "2", work + "/killed.txt"), &status, 0);
  const std::string resumed = read(work + "/killed.txt");
  std::printf("uninterrupted, 1 thread:            %s", whole.c_str());
  std::printf("killed 3 times and resumed, 2 threads: %s", resumed.c_str());
  const auto crc = [](const std::string& line) { return line.substr(line.find("crc32c")); };
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || whole.empty() || resumed.empty() || crc(whole) != crc(resumed) ||
      resumed.rfind("step 600 ", 0) != 0) {
    std::fprintf(stderr, "the resumed run does not end with the uninterrupted run's bits\n");
    return 1;
  }
  std::printf("the same bits\n");
  return 0;
}
