#include "train/run/run_directory.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "framework/io/safetensors.hpp"
#include "train/run/checkpoint.hpp"
#include "train/run/metrics_csv.hpp"
#include "train/run/shell_quote.hpp"

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

// The files a run leaves; a directory with any of the checkpoint ones holds a run.
const char* const kCheckpointFiles[] = {"model.safetensors", "optimizer.safetensors", "optimizer.prev.safetensors"};
const char* const kOtherRunFiles[] = {"metrics.csv", "curves.svg", "attention.svg"};
const char* const kLockFile = "run.lock";

// Refuses a name of the run's files that is there as anything but a regular file: above all a
// symbolic link, which a write could follow out of the directory.
void refuse_non_regular(const std::string& dir) {
  for (const std::string& name : RunDirectory::file_names()) {
    const fs::path p = fs::path(dir) / name;
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) continue; // absent (or unreadable: the open will say)
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const fs::path target = fs::read_symlink(p, ec);
      throw std::invalid_argument(fmt::format("--out {}: {} is a symbolic link (to {}); a run does not write through "
                                              "links: remove it or choose another --out",
                                              dir, name, ec ? "?" : target.string()));
    }
    if (!S_ISREG(st.st_mode))
      throw std::invalid_argument(fmt::format("--out {}: {} is {}, not a regular file; remove it or choose another "
                                              "--out",
                                              dir, name,
                                              S_ISDIR(st.st_mode)    ? "a directory"
                                              : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                                                                     : "a special file"));
  }
}

// Takes DIR/run.lock or throws naming its holder; returns the open descriptor that holds it.
int lock(const std::string& dir) {
  const std::string path = (fs::path(dir) / kLockFile).string();
  // O_NOFOLLOW: a link planted since refuse_non_regular is not followed (ELOOP); O_NONBLOCK: nor
  // does a FIFO block the open.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::invalid_argument(fmt::format("--out {}: cannot open {} ({})", dir, path,
                                            errno == ELOOP ? "it is a symbolic link" : std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw std::invalid_argument(fmt::format("--out {}: {} is not a regular file", dir, path));
  }
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

// A metrics.csv with nothing in it but (part of) its header: a run that stopped before its first
// step left it, and replacing it loses nothing.
bool empty_log(const fs::path& p) {
  if (p.filename() != "metrics.csv") return false;
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec || size > 256) return false;
  std::ifstream in(p, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return std::string(kMetricsHeader).rfind(text, 0) == 0; // a prefix of the header, or all of it
}

// Refuses (or, with overwrite, clears) a directory that holds a checkpoint other than the one
// this run resumes, or files of a run's names with no checkpoint at all. Returns whether the
// directory holds the checkpoint this run resumes.
bool claim(const std::string& dir, const std::string& resume, bool overwrite) {
  const fs::path d(dir);
  std::error_code ec;
  bool holds = false;
  for (const char* f : kCheckpointFiles) holds = holds || fs::exists(d / f, ec);
  if (holds && !resume.empty() && fs::equivalent(d / "model.safetensors", resume, ec)) return true; // it continues
  std::string others;
  for (const char* f : kOtherRunFiles) {
    if (!fs::exists(d / f, ec)) continue;
    if (!holds && empty_log(d / f)) fs::remove(d / f, ec); // nothing in it to keep
    else others += fmt::format("{}{}", others.empty() ? "" : ", ", f);
  }
  if (!holds && others.empty()) return false;
  if (!overwrite && holds)
    throw std::invalid_argument(fmt::format("--out {} holds the checkpoint of another run{}; --resume {} continues "
                                            "it, --overwrite replaces it, or choose another --out",
                                            dir, step_of_checkpoint(d),
                                            shell_quote((d / "model.safetensors").string())));
  if (!overwrite)
    throw std::invalid_argument(fmt::format("--out {} holds {} but no checkpoint (another program's files, or a run "
                                            "killed before its first save); --overwrite replaces them, or choose "
                                            "another --out",
                                            dir, others));
  for (const char* f : kCheckpointFiles) fs::remove(d / f, ec);
  for (const char* f : kOtherRunFiles) fs::remove(d / f, ec);
  return false;
}

} // namespace

const std::vector<std::string>& RunDirectory::file_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {kLockFile};
    for (const char* f : kCheckpointFiles) v.push_back(f);
    for (const char* f : kOtherRunFiles) v.push_back(f);
    return v;
  }();
  return names;
}

RunDirectory::RunDirectory(const std::string& dir, const std::string& resume, bool overwrite) {
  prepare(dir);
  refuse_non_regular(dir);
  lock_fd_ = lock(dir);
  try {
    continues_ = claim(dir, resume, overwrite);
  } catch (...) {
    close(lock_fd_);
    throw;
  }
}

RunDirectory::~RunDirectory() { close(lock_fd_); } // closing the descriptor releases the lock

} // namespace headgrad::train
