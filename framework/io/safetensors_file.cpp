// safetensors_file.cpp - load_safetensors and the atomic save_safetensors (POSIX I/O).
//
// Loading reads the 8-byte length, then the header, validates it against the file size, and only
// then allocates each tensor and reads its bytes straight into its storage with pread: memory is
// the tensors themselves, never a second copy of the file.
//
// Saving never leaves a half-written file at `path`: a crash or error mid-write (disk full, a
// file-size limit, a signal) leaves the old file. The sequence is the classic one:
//   write "<path>.tmp.<pid>.<n>" -> fsync it -> close -> rename over path -> fsync the directory
// rename() within one directory is atomic on POSIX file systems: readers see the old file or the
// new one. The first fsync makes the data durable before the rename can be; the directory fsync
// makes the rename itself durable. The <n> (a per-process counter) keeps two threads saving to
// the same path from writing into one temporary file. A writer killed mid-save (SIGKILL) leaves
// its temporary file behind; the next save to that path removes it (remove_stale_temp_files).
#include <atomic>
#include <cerrno>
#include <csignal>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdexcept>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "framework/io/regular_file.hpp"
#include "framework/io/safetensors_format.hpp"

namespace headgrad::io {
namespace {

[[noreturn]] void io_fail(const std::string& path, const std::string& what, int err) {
  throw std::runtime_error(fmt::format("{}: {}: {}", path, what, errno_text(err)));
}

// Closes the descriptor on every path out of a scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  // close() can report a deferred write error (NFS, some FUSE), so the save path checks it.
  int release_and_close() {
    const int rc = ::close(fd);
    fd = -1;
    return rc;
  }
};

// Reads exactly n bytes at `offset` (pread: no shared file position), retrying on EINTR and on
// short reads; the file ending early means it changed since fstat.
void read_exact(int fd, void* dst, std::size_t n, std::uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      io_fail(path, fmt::format("read failed at byte {}", offset), errno);
    }
    if (r == 0)
      throw std::runtime_error(fmt::format("{}: file ended at byte {} while reading (was it changed while being read?)",
                                           path, offset));
    p += r;
    n -= static_cast<std::size_t>(r);
    offset += static_cast<std::uint64_t>(r);
  }
}

void write_all(int fd, const void* src, std::size_t n, const std::string& path, const std::string& tmp) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      io_fail(path, fmt::format("cannot write temporary file '{}'", tmp), errno);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// "<pid>.<n>" (both decimal, no sign) -> pid; 0 if `rest` has any other shape.
pid_t temp_writer_pid(const std::string& rest) {
  const auto dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || dot + 1 == rest.size()) return 0;
  for (std::size_t i = 0; i < rest.size(); ++i)
    if (i != dot && (rest[i] < '0' || rest[i] > '9')) return 0;
  if (dot > 9) return 0; // longer than any pid
  return static_cast<pid_t>(std::stol(rest.substr(0, dot)));
}

} // namespace

std::size_t remove_stale_temp_files(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir = parent_dir(path);
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  std::vector<std::string> stale;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      const pid_t pid = temp_writer_pid(name.substr(prefix.size()));
      // kill(pid, 0) probes without signalling: ESRCH = no such process. (EPERM: it exists.)
      if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(name);
    }
    ::closedir(d);
  }
  std::size_t removed = 0;
  for (const std::string& name : stale)
    if (::unlink((dir == "/" ? "/" + name : dir + "/" + name).c_str()) == 0) ++removed;
  return removed;
}

SafetensorsFile load_safetensors(const std::string& path) {
  Fd f(open_regular_file(path, "a safetensors file")); // a FIFO or a device is refused, not waited on
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) io_fail(path, "cannot stat", errno);
  const auto size = static_cast<std::uint64_t>(st.st_size);

  unsigned char first8[8] = {};
  if (size >= 8) read_exact(f.fd, first8, 8, 0, path);
  const std::uint64_t n = detail::check_header_length(first8, size, path); // before any allocation
  std::string header(n, '\0');
  read_exact(f.fd, header.data(), n, 8, path);
  detail::Layout layout = detail::parse_header(header, size - 8 - n, path);
  return detail::read_tensors(layout, path, [&](void* dst, const detail::Entry& e) {
    read_exact(f.fd, dst, e.end - e.begin, 8 + n + e.begin, path);
  });
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata, const SaveOptions& options) {
  // Bad input is refused before any file is touched.
  std::uint64_t data_size = 0;
  const std::string header =
      detail::make_header(tensors, detail::metadata_to_write(tensors, metadata, options, path), path, data_size);

  remove_stale_temp_files(path); // leftovers of writers that were killed mid-save

  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  // O_NOFOLLOW: a symlink planted at the temporary name is not followed. O_TRUNC: a leftover
  // from a crashed process that had the same pid is simply overwritten.
  Fd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666));
  if (f.fd < 0) io_fail(path, fmt::format("cannot create temporary file '{}'", tmp), errno);
  try {
    const std::string prefix = detail::le64(header.size()) + header;
    write_all(f.fd, prefix.data(), prefix.size(), path, tmp);
    for (const auto& nt : tensors)
      detail::tensor_bytes(nt.second, [&](const void* p, std::size_t n) { write_all(f.fd, p, n, path, tmp); });
    if (::fsync(f.fd) != 0) io_fail(path, fmt::format("cannot fsync temporary file '{}'", tmp), errno);
    if (f.release_and_close() != 0) io_fail(path, fmt::format("cannot close temporary file '{}'", tmp), errno);
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      io_fail(path, fmt::format("cannot rename temporary file '{}' over it", tmp), errno);
  } catch (...) {
    if (f.fd >= 0) f.release_and_close();
    ::unlink(tmp.c_str());
    throw;
  }

  // The new file is in place; make the rename durable. Some file systems cannot fsync a
  // directory (EINVAL, ENOTSUP): there is nothing more to do on those.
  const std::string dir = parent_dir(path);
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd < 0) io_fail(path, fmt::format("saved, but cannot open directory '{}' to fsync it", dir), errno);
  if (::fsync(d.fd) != 0 && errno != EINVAL && errno != ENOTSUP)
    io_fail(path, fmt::format("saved, but cannot fsync directory '{}' (the rename may not survive a crash)", dir),
            errno);
}

} // namespace headgrad::io
