#include "bench/processes.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace headgrad::bench {

std::int64_t proc_status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.rfind(prefix, 0) == 0) return std::strtoll(line.c_str() + prefix.size(), nullptr, 10);
  return -1;
}

namespace {
std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> v;
  for (const auto& a : argv) v.push_back(const_cast<char*>(a.c_str()));
  v.push_back(nullptr);
  return v;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}
} // namespace

int run_process(const std::vector<std::string>& argv, const EnvChanges& env, const std::string& stdout_path) {
  std::fflush(stdout);
  std::fflush(stderr);
  auto args = c_argv(argv);
  // The child's environment, built before fork (only async-signal-safe calls after it).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (!env.count(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env)
    if (v) env_strings.push_back(k + "=" + *v);
  auto envp = c_argv(env_strings);
  const int fd = stdout_path.empty() ? -1 : open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!stdout_path.empty() && fd < 0) return 127;
  const pid_t pid = fork();
  if (pid < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  if (pid == 0) {
    if (fd >= 0 && dup2(fd, STDOUT_FILENO) < 0) _exit(127);
    execve(args[0], args.data(), envp.data());
    static const char msg[] = "bench: cannot run a child process\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(127);
  }
  if (fd >= 0) close(fd);
  return wait_for(pid);
}

std::string capture_process(const std::vector<std::string>& argv, int* code) {
  std::fflush(stdout);
  std::fflush(stderr);
  int fds[2];
  if (pipe(fds) != 0) {
    *code = -1;
    return "";
  }
  auto args = c_argv(argv);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    *code = -1;
    return "";
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[1]);
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  std::array<char, 4096> buf;
  for (;;) {
    const ssize_t n = read(fds[0], buf.data(), buf.size());
    if (n > 0) out.append(buf.data(), static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  *code = wait_for(pid);
  return out;
}

} // namespace headgrad::bench
