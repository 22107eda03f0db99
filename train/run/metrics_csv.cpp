#include "train/run/metrics_csv.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include "framework/io/regular_file.hpp"

namespace headgrad::train {
namespace {

constexpr const char* kHeader = kMetricsHeader;

// The longest line a log holds: a row is a step (at most 19 digits) and six numbers of a few
// dozen characters at most. A longer line is damage (or not a log), refused before it is held.
constexpr std::size_t kMaxLineBytes = 1024;

// A log of ours that is damaged: a malformed row, a line longer than any row, after its header. (A
// file that cannot be read, or whose first line is not the header - not a log of ours - is a plain
// std::invalid_argument: a resumed run refuses it rather than move it.)
struct DamagedLog : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A step field: a whole number of at most 18 digits (no sign, exponent, fraction, nan or inf).
bool step_number(const std::string& field, std::int64_t& step) {
  if (field.empty() || field.size() > 18 || field.find_first_not_of("0123456789") != std::string::npos) return false;
  step = std::stoll(field);
  return true;
}

// A field of a damaged line, fit for a one-line message.
std::string shown(const std::string& field) {
  std::string s = field.size() > 24 ? field.substr(0, 21) + "..." : field;
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return s;
}

// A number field of a row; empty fields are absent values (false).
bool number(const std::string& field, double& value) {
  if (field.empty()) return false;
  char* end = nullptr;
  value = std::strtod(field.c_str(), &end);
  return *end == '\0';
}

// Calls fn(line, offset of its first byte) for each complete line of the file at fd (without its
// '\n'), reading from the start, until fn returns false. An unfinished last line is not passed.
void for_each_line(int fd, const std::string& path, const std::function<bool(const std::string&, std::uint64_t)>& fn) {
  std::vector<char> buf(1 << 16);
  std::string line;
  std::uint64_t offset = 0, line_start = 0, line_number = 1;
  for (;;) {
    const ssize_t r = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::invalid_argument(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
    if (r == 0) return;
    for (ssize_t i = 0; i < r; ++i) {
      if (buf[static_cast<std::size_t>(i)] != '\n') {
        if (line.size() == kMaxLineBytes && line_number == 1)
          throw std::invalid_argument(fmt::format("{}: not a headgrad metrics.csv (its first line is longer than {} "
                                                  "bytes)",
                                                  path, kMaxLineBytes));
        if (line.size() == kMaxLineBytes)
          throw DamagedLog(fmt::format("{}:{}: a line longer than {} bytes, not a row of the log", path, line_number,
                                       kMaxLineBytes));
        line += buf[static_cast<std::size_t>(i)];
        continue;
      }
      if (!fn(line, line_start)) return;
      ++line_number;
      line.clear();
      line_start = offset + static_cast<std::uint64_t>(i) + 1;
    }
    offset += static_cast<std::uint64_t>(r);
  }
}

// One row: its step, and the step's values and/or the evaluation's when present.
struct Row {
  std::int64_t step = 0;
  bool has_step = false, has_eval = false;
  double loss = 0, lr = 0, eval_loss = 0, token_acc = 0, seq_acc = 0;
};

Row parse_row(const std::string& line, const std::string& path, int line_number) {
  std::vector<std::string> f;
  std::istringstream fields(line + ",");
  for (std::string field; std::getline(fields, field, ',');) f.push_back(field);
  if (f.size() != 7)
    throw DamagedLog(fmt::format("{}:{}: not a row of 7 fields starting with the step", path, line_number));
  Row r;
  if (!step_number(f[0], r.step))
    throw DamagedLog(fmt::format("{}:{}: the step '{}' is not a step number (a whole number of at most 18 digits)",
                                 path, line_number, shown(f[0])));
  r.has_step = number(f[1], r.loss) && number(f[2], r.lr);
  r.has_eval = number(f[4], r.eval_loss) && number(f[5], r.token_acc) && number(f[6], r.seq_acc);
  return r;
}

void add_row(CurveLog& log, const Row& r) {
  if (r.has_step) log.add_step(r.step, r.loss, r.lr);
  if (r.has_eval) log.add_eval(r.step, r.eval_loss, r.token_acc, r.seq_acc);
}

// Reads the log at fd into `log`, up to the first row after `last_step` (all rows without it);
// returns the length of what is kept: the header and those rows (0 if not even the header is
// complete). Throws naming the file if its first line is not the header or a row is malformed.
std::uint64_t read_log(int fd, const std::string& path, std::optional<std::int64_t> last_step, CurveLog& log) {
  std::uint64_t keep = 0;
  int line_number = 0;
  for_each_line(fd, path, [&](const std::string& line, std::uint64_t start) {
    if (++line_number == 1) {
      if (line != kHeader) // not a log of ours (a user's file): refused, never moved
        throw std::invalid_argument(
            fmt::format("{}: not a headgrad metrics.csv (its first line is not {})", path, kHeader));
    } else {
      const Row r = parse_row(line, path, line_number);
      if (last_step && r.step > *last_step) return false; // logged after the checkpoint: cut from here
      add_row(log, r);
    }
    keep = start + line.size() + 1;
    return true;
  });
  return keep;
}

// Renames the log at `path` to the first free name of path.damaged, path.damaged.1, ... (never
// over an earlier damaged log) and returns that name.
template <typename Refuse> std::string keep_aside(const std::string& path, const Refuse& refuse) {
  for (int n = 0; n < 1000; ++n) {
    const std::string aside = path + ".damaged" + (n == 0 ? std::string() : fmt::format(".{}", n));
    std::error_code ec;
    if (std::filesystem::symlink_status(aside, ec).type() != std::filesystem::file_type::not_found) continue;
    if (::rename(path.c_str(), aside.c_str()) != 0) throw refuse(std::strerror(errno));
    return aside;
  }
  throw refuse("it is damaged, and 1000 damaged logs are already kept aside beside it");
}

} // namespace

void CurveLog::add_step(std::int64_t step, double loss, double lr) {
  if (step <= steps_.last_step()) steps_.cut_from(step);
  steps_.add(step, {loss, lr});
}

void CurveLog::add_eval(std::int64_t step, double loss, double token_acc, double seq_acc) {
  if (step <= evals_.last_step()) evals_.cut_from(step);
  evals_.add(step, {loss, token_acc, seq_acc});
}

MetricsLog CurveLog::log() const {
  MetricsLog out;
  for (const auto& p : steps_.points()) out.steps.push_back({p.step, p.values[0], p.values[1]});
  for (const auto& p : evals_.points()) out.evals.push_back({p.step, p.values[0], p.values[1], p.values[2]});
  out.rows_per_point = steps_.rows_per_point();
  out.last_step = std::max<std::int64_t>(0, steps_.last_step());
  return out;
}

MetricsCsv::MetricsCsv(const std::string& out_dir, std::optional<std::int64_t> resume_step)
    : file_(nullptr, &std::fclose), path_((std::filesystem::path(out_dir) / "metrics.csv").string()) {
  auto refuse = [&](const std::string& why) {
    return std::invalid_argument(fmt::format("--out {}: cannot write metrics.csv ({})", out_dir, why));
  };
  // O_NOFOLLOW: a symbolic link is refused (ELOOP), never written through; O_NONBLOCK: a FIFO
  // there does not block the open (it is refused as not a regular file).
  int fd = resume_step ? ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
  if (fd < 0 && resume_step && errno != ENOENT)
    throw refuse(errno == ELOOP ? "it is a symbolic link" : std::strerror(errno));
  bool fresh = fd < 0;
  if (fresh) {
    fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw refuse(errno == EEXIST ? "it exists" : errno == ELOOP ? "it is a symbolic link" : std::strerror(errno));
  }
  try {
    try {
      io::require_regular_file(fd, path_, "metrics.csv");
    } catch (const std::runtime_error& e) {
      throw refuse(e.what());
    }
    (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (!fresh) { // a killed run's log: cut back to the checkpoint, and an empty log is a fresh one
      std::uint64_t keep = 0;
      try {
        keep = read_log(fd, path_, resume_step, curves_);
      } catch (const DamagedLog& damage) {
        // The checkpoint is the truth and the log its history: a damaged log does not stop the
        // run. It is kept aside as it is, and a fresh log continues from the checkpoint's step.
        ::close(fd);
        fd = -1;
        const std::string aside = keep_aside(path_, refuse);
        fmt::print(stderr, "headgrad: note: {}; kept aside as {}, a fresh metrics.csv continues after step {}\n",
                   damage.what(), aside, *resume_step);
        std::fflush(stderr);
        curves_ = CurveLog{};
        fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0) throw refuse(std::strerror(errno));
      }
      if (::ftruncate(fd, static_cast<off_t>(keep)) != 0) throw refuse(std::strerror(errno));
      fresh = keep == 0;
    }
    if (::lseek(fd, 0, SEEK_END) < 0) throw refuse(std::strerror(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    throw;
  }
  file_.reset(::fdopen(fd, "a"));
  if (!file_) {
    ::close(fd);
    throw refuse(std::strerror(errno));
  }
  if (fresh) fmt::print(file_.get(), "{}\n", kHeader);
  std::fflush(file_.get());
}

void MetricsCsv::step_row(std::int64_t step, double loss, double lr, double tokens_per_s) {
  fmt::print(file_.get(), "{},{:.6f},{:.6g},{:.1f},,,\n", step, loss, lr, tokens_per_s);
  curves_.add_step(step, loss, lr);
  if (step % 50 == 0) std::fflush(file_.get()); // someone may be watching the file
}

void MetricsCsv::eval_row(std::int64_t step, const EvalResult& e) {
  fmt::print(file_.get(), "{},,,,{:.6f},{:.6f},{:.6f}\n", step, e.loss, e.token_acc, e.seq_acc);
  curves_.add_eval(step, e.loss, e.token_acc, e.seq_acc);
  std::fflush(file_.get());
}

void MetricsCsv::flush() {
  if (std::fflush(file_.get()) != 0 || ::fdatasync(fileno(file_.get())) != 0)
    throw std::runtime_error(fmt::format("{}: cannot write ({})", path_, std::strerror(errno)));
}

MetricsLog read_metrics_csv(const std::string& path) {
  // O_NONBLOCK: a FIFO is refused, not waited on
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::invalid_argument(fmt::format("{}: cannot read ({})", path, std::strerror(errno)));
  CurveLog log;
  try {
    try {
      io::require_regular_file(fd, path, "a metrics.csv");
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
    if (read_log(fd, path, std::nullopt, log) == 0) // not even a complete first line
      throw std::invalid_argument(
          fmt::format("{}: not a headgrad metrics.csv (its first line is not {})", path, kHeader));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return log.log();
}

} // namespace headgrad::train
