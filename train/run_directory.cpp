#include "train/run_directory.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>
#include <sys/file.h>
#include <unistd.h>

#include "framework/io/safetensors.hpp"
#include "train/checkpoint.hpp"

namespace headgrad::train {
namespace {

namespace fs = std::filesystem;

// Creates the directory if it is missing; refuses one that cannot be written.
void prepare(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw std::invalid_argument(fmt::format("--out {}: cannot create the directory ({})", dir,
                                            ec ? ec.message() : "exists and is not a directory"));
  if (access(dir.c_str(), W_OK) != 0)
    throw std::invalid_argument(fmt::format("--out {}: the directory is not writable", dir));
}

// "pid 4242 on host a, started 2024-05-01 12:00:00"
std::string holder_text() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("pid {} on host {}, started {}", getpid(), host, when);
}

// Takes DIR/run.lock or throws naming its holder; returns the open descriptor that holds it.
int lock(const std::string& dir) {
  const std::string path = (fs::path(dir) / "run.lock").string();
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::invalid_argument(fmt::format("--out {}: cannot open {} ({})", dir, path, std::strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[512] = {};
    const ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    close(fd);
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
    if (!who.empty() && who.back() == '\n') who.pop_back();
    if (err != EWOULDBLOCK)
      throw std::invalid_argument(fmt::format("--out {}: cannot lock {} ({})", dir, path, std::strerror(err)));
    throw std::invalid_argument(fmt::format("--out {} is in use by another run ({}); wait for it to end or choose "
                                            "another --out",
                                            dir, who.empty() ? "starting up" : who));
  }
  const std::string who = holder_text() + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, who.data(), who.size(), 0) != static_cast<ssize_t>(who.size())) {
    close(fd);
    throw std::invalid_argument(fmt::format("--out {}: cannot write {} ({})", dir, path, std::strerror(errno)));
  }
  return fd;
}

// The files a run leaves; a directory with any of the checkpoint ones holds a run.
const char* const kCheckpointFiles[] = {"model.safetensors", "optimizer.safetensors", "optimizer.prev.safetensors"};
const char* const kOtherRunFiles[] = {"metrics.csv", "attention.svg"};

// " (step N)" of the checkpoint in dir, if its model file reads as one; "" otherwise.
std::string step_of_checkpoint(const fs::path& dir) {
  try {
    std::int64_t step = 0;
    (void)run_config_from_metadata(io::load_safetensors((dir / "model.safetensors").string()).metadata, "", step);
    return fmt::format(" (step {})", step);
  } catch (const std::exception&) {
    return "";
  }
}

// Refuses (or, with overwrite, clears) a directory that holds a checkpoint other than the one
// this run resumes.
void claim(const std::string& dir, const std::string& resume, bool overwrite) {
  const fs::path d(dir);
  std::error_code ec;
  bool holds = false;
  for (const char* f : kCheckpointFiles) holds = holds || fs::exists(d / f, ec);
  if (!holds) return;
  if (!resume.empty() && fs::equivalent(d / "model.safetensors", resume, ec)) return; // the run it continues
  if (!overwrite)
    throw std::invalid_argument(fmt::format("--out {} holds the checkpoint of another run{}; --resume {} continues "
                                            "it, --overwrite replaces it, or choose another --out",
                                            dir, step_of_checkpoint(d), (d / "model.safetensors").string()));
  for (const char* f : kCheckpointFiles) fs::remove(d / f, ec);
  for (const char* f : kOtherRunFiles) fs::remove(d / f, ec);
}

} // namespace

RunDirectory::RunDirectory(const std::string& dir, const std::string& resume, bool overwrite) {
  prepare(dir);
  lock_fd_ = lock(dir);
  try {
    claim(dir, resume, overwrite);
  } catch (...) {
    close(lock_fd_);
    throw;
  }
}

RunDirectory::~RunDirectory() { close(lock_fd_); } // closing the descriptor releases the lock

} // namespace headgrad::train
