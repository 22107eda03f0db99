#include "data/token_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "framework/core/random.hpp"
#include "data/windows.hpp"

namespace headgrad::data {
namespace {

std::invalid_argument token_file_error(const std::string& path, const std::string& why) {
  return std::invalid_argument(fmt::format("{}: {}", path, why));
}

// meta.json's "vocab_size" (the one field read; the file is JSON, an object holding it).
std::int64_t read_vocab_size(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw token_file_error(path, "cannot be read (give the vocabulary size, or write {\"vocab_size\": N} there)");
  std::stringstream text;
  text << in.rdbuf();
  std::smatch m;
  const std::string s = text.str();
  if (!std::regex_search(s, m, std::regex(R"("vocab_size"\s*:\s*([0-9]{1,9})\s*[,}])")))
    throw token_file_error(path, "has no \"vocab_size\": N");
  return std::stoll(m[1]);
}

} // namespace

TokenFiles::TokenFiles(const std::string& dir, std::int64_t context, std::uint64_t seed, std::int64_t vocab_size)
    : dir_(dir), context_(context), vocab_(vocab_size), seed_(seed) {
  if (context < 1) throw std::invalid_argument(fmt::format("TokenFiles: context must be at least 1, got {}", context));
  if (vocab_ == 0) vocab_ = read_vocab_size(dir + "/meta.json");
  if (vocab_ < 2 || vocab_ > 65536)
    throw token_file_error(dir, fmt::format("vocab_size {} is outside [2, 65536] (uint16 token ids)", vocab_));
  train_ = map("train.bin");
  try {
    val_ = map("val.bin");
  } catch (...) {
    munmap(const_cast<std::uint16_t*>(train_.data), static_cast<std::size_t>(train_.tokens) * 2);
    throw;
  }
}

TokenFiles::~TokenFiles() {
  for (const Mapped* f : {&train_, &val_})
    if (f->data) munmap(const_cast<std::uint16_t*>(f->data), static_cast<std::size_t>(f->tokens) * 2);
}

TokenFiles::Mapped TokenFiles::map(const std::string& name) const {
  Mapped f;
  f.path = dir_ + "/" + name;
  const int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw token_file_error(f.path, fmt::format("cannot be opened ({})", std::strerror(errno)));
  const std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* p) {
    close(*p);
    delete p;
  });
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw token_file_error(f.path, "is not a regular file");
  if (st.st_size % 2 != 0)
    throw token_file_error(f.path, fmt::format("has {} bytes, an odd number: not uint16 token ids", st.st_size));
  f.tokens = st.st_size / 2;
  if (f.tokens <= context_)
    throw token_file_error(f.path, fmt::format("holds {} tokens, too few for one window of {} and its target", f.tokens, context_));
  void* p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) throw token_file_error(f.path, fmt::format("cannot be memory-mapped ({})", std::strerror(errno)));
  madvise(p, static_cast<std::size_t>(st.st_size), MADV_RANDOM); // windows at random offsets: no read-ahead
  f.data = static_cast<const std::uint16_t*>(p);
  return f;
}

Batch TokenFiles::windows(const Mapped& file, const std::vector<std::int64_t>& starts) const {
  return window_batch(starts, context_, [&](std::int64_t o, std::int64_t* out) {
    for (std::int64_t t = 0; t <= context_; ++t) {
      const std::int64_t token = file.data[o + t];
      if (token >= vocab_)
        throw token_file_error(file.path, fmt::format("token {} at position {} is not below the vocabulary size {}",
                                                      token, o + t, vocab_));
      out[t] = token;
    }
  });
}

Batch TokenFiles::batch(std::uint64_t index, std::int64_t batch_size) const {
  if (batch_size < 1) throw std::invalid_argument(fmt::format("TokenFiles::batch: batch_size {} < 1", batch_size));
  Generator gen(mix_seed(seed_, index));
  return windows(train_, window_offsets(gen, 0, train_.tokens, context_, batch_size));
}

std::function<Batch(std::int64_t)> TokenFiles::eval_reader(std::int64_t count) const {
  if (count < 1) throw std::invalid_argument(fmt::format("TokenFiles::eval_set: count {} < 1", count));
  auto gen = std::make_shared<Generator>(kEvalSeed);
  auto left = std::make_shared<std::int64_t>(count);
  return [this, gen, left](std::int64_t rows) {
    const std::int64_t n = std::min(std::max<std::int64_t>(rows, 1), *left);
    if (n == 0) return Batch{};
    *left -= n;
    return windows(val_, window_offsets(*gen, 0, val_.tokens, context_, n));
  };
}

Batch TokenFiles::eval_set(std::int64_t count) const { return eval_reader(count)(count); }

} // namespace headgrad::data
