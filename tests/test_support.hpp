// test_support.hpp - what the test files share: random tensors, closeness checks, the message of
// a thrown exception, temporary directories, whole-file reads and writes, text helpers.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "framework/random.hpp"
#include "framework/tensor.hpp"

namespace test_support {

namespace fs = std::filesystem;
using headgrad::Dims;
using headgrad::DType;
using headgrad::Tensor;

// N(0, 1) values from a fixed seed (float64 unless asked otherwise).
inline Tensor randn(const Dims& shape, std::uint64_t seed, DType dtype = DType::f64) {
  headgrad::Generator g(seed);
  return Tensor::normal(shape, 0.0, 1.0, g, dtype);
}

// Every element close to the reference in numpy.isclose's (and torch.allclose's) sense:
// |got - want| <= atol + rtol |want|. rtol defaults to atol (an absolute bound for small values,
// a relative one for large); pass rtol = 0 for a purely absolute bound.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol = 1e-12,
                        double rtol = -1) {
  if (rtol < 0) rtol = atol;
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element ", i, ": got ", got[i], ", want ", want[i]);
    CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}
inline void check_close(const Tensor& got, const std::vector<double>& want, double atol = 1e-12, double rtol = -1) {
  check_close(got.to_vector(), want, atol, rtol);
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// How often `part` occurs in s (non-overlapping).
inline std::size_t count_of(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + part.size())) ++n;
  return n;
}

inline std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The message of the E that f throws. Anything else - another exception, or nothing thrown - is a
// failed check (and the returned text says which).
template <typename E = std::exception, typename F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (...) {
    std::string what = "(not a std::exception)";
    try {
      throw;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    FAIL_CHECK("expected another exception type, got: " << what);
    return "<wrong exception type> " + what;
  }
  FAIL_CHECK("expected an exception, nothing was thrown");
  return "<no exception>";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under the system temp dir, removed (with everything in it) at scope exit.
// `tag` names it after the test file, so leftovers say where they came from.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag = "test") {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("headgrad_{}_{}_{}", tag, ::getpid(), n++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec); // a test may have made it read-only
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // Leftover temporary files ("<name>.tmp.<pid>.<n>", as atomic writes name them) anywhere inside.
  std::vector<std::string> temp_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (contains(e.path().filename().string(), ".tmp.")) out.push_back(e.path().string());
    return out;
  }
};

} // namespace test_support
