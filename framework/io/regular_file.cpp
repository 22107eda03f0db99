#include "framework/io/regular_file.hpp"

#include <cerrno>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace headgrad::io {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

namespace {

std::string kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

} // namespace

std::string file_kind(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "unknown (" + errno_text(errno) + ")";
  return kind_of_mode(st.st_mode);
}

void require_regular_file(int fd, const std::string& path, const std::string& wanted) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::runtime_error(fmt::format("{}: cannot stat: {}", path, errno_text(errno)));
  if (S_ISREG(st.st_mode)) return;
  if (S_ISDIR(st.st_mode)) throw std::runtime_error(fmt::format("{}: is a directory, not {}", path, wanted));
  throw std::runtime_error(
      fmt::format("{}: is {}, not a regular file ({} must be one)", path, kind_of_mode(st.st_mode), wanted));
}

int open_regular_file(const std::string& path, const std::string& wanted) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(fmt::format("{}: cannot open for reading: {}", path, errno_text(errno)));
  try {
    require_regular_file(fd, path, wanted);
  } catch (...) {
    ::close(fd);
    throw;
  }
  // O_NONBLOCK does nothing to a regular file's reads on Linux; cleared all the same, so that the
  // descriptor behaves as a plain open() would everywhere.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::string& path, const std::string& wanted) {
  const int fd = open_regular_file(path, wanted);
  struct stat st {};
  std::string out;
  try {
    if (::fstat(fd, &st) != 0) throw std::runtime_error(fmt::format("{}: cannot stat: {}", path, errno_text(errno)));
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t r = ::read(fd, out.data() + done, out.size() - done);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw std::runtime_error(fmt::format("{}: read failed: {}", path, errno_text(errno)));
      if (r == 0) break; // the file shrank since fstat: keep what is there
      done += static_cast<std::size_t>(r);
    }
    out.resize(done);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

} // namespace headgrad::io
