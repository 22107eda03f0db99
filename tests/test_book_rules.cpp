// test_book_rules.cpp - the line between the book (framework/core, ops, nn, optim, models but its
// check rows) and the engine (framework/engine): a book file includes no engine header but the
// seam, framework/engine/kernels.hpp, and nothing that makes code fast on its own (an OpenMP
// pragma or omp.h, BLAS, SLEEF, the x86 intrinsics); the engine includes nothing of the book. Each
// rule is also shown a file that breaks it (a negative control).
#include <doctest/doctest.h>

#include <regex>
#include <string>
#include <vector>

#include "tests/test_support.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path kSource = HEADGRAD_SOURCE_DIR;

// What in `text` breaks the book's rules, one line each ("" when nothing does).
std::string book_violations(const std::string& text) {
  static const std::regex engine_include(R"(#\s*include\s*["<]framework/engine/([^">]*)[">])");
  static const std::regex fast_code(R"((#\s*pragma\s+omp)|(#\s*include\s*<(omp\.h|cblas\.h|sleef\.h|[a-z]*intrin\.h)>))");
  std::string found;
  for (const std::string& line : test_support::lines_of(text)) {
    std::smatch m;
    if (std::regex_search(line, m, engine_include) && m[1].str() != "kernels.hpp") found += line + "\n";
    else if (std::regex_search(line, fast_code)) found += line + "\n";
  }
  return found;
}

// What in `text` (an engine file) includes the book.
std::string engine_violations(const std::string& text) {
  static const std::regex book_include(R"(#\s*include\s*["<](framework/(core|ops|nn|optim)|models)/)");
  std::string found;
  for (const std::string& line : test_support::lines_of(text))
    if (std::regex_search(line, book_include)) found += line + "\n";
  return found;
}

// The C++ files under these folders of the source tree, but those under `skip`.
std::vector<fs::path> sources(const std::vector<std::string>& dirs, const std::string& skip = "") {
  std::vector<fs::path> out;
  for (const std::string& d : dirs)
    for (const auto& e : fs::recursive_directory_iterator(kSource / d)) {
      const fs::path p = e.path();
      if (!e.is_regular_file() || (p.extension() != ".cpp" && p.extension() != ".hpp")) continue;
      if (!skip.empty() && fs::relative(p, kSource).string().rfind(skip, 0) == 0) continue;
      out.push_back(p);
    }
  return out;
}

} // namespace

TEST_CASE("book rules: a book file includes the seam and no other engine header, and no fast code of its own") {
  const auto files = sources({"framework/core", "framework/ops", "framework/nn", "framework/optim", "models"},
                             "models/checks");
  REQUIRE(files.size() > 40);
  for (const fs::path& f : files) {
    INFO(fs::relative(f, kSource).string());
    CHECK(book_violations(test_support::read_file(f)) == "");
  }
}

TEST_CASE("book rules: the engine includes nothing of the book") {
  const auto files = sources({"framework/engine"});
  REQUIRE(files.size() > 20);
  for (const fs::path& f : files) {
    INFO(fs::relative(f, kSource).string());
    CHECK(engine_violations(test_support::read_file(f)) == "");
  }
}

TEST_CASE("book rules: files that break them are caught (negative control)") {
  CHECK(book_violations("#include \"framework/engine/kernels.hpp\"\n#include \"framework/core/tensor.hpp\"\n") == "");
  CHECK(book_violations("#include \"framework/engine/kernels/gemm.hpp\"\n") != "");
  CHECK(book_violations("#include \"framework/engine/profiler.hpp\"\n") != "");
  CHECK(book_violations("  #pragma omp parallel for\n") != "");
  CHECK(book_violations("#include <omp.h>\n") != "");
  CHECK(book_violations("#include <cblas.h>\n") != "");
  CHECK(book_violations("#include <sleef.h>\n") != "");
  CHECK(book_violations("#include <immintrin.h>\n") != "");
  CHECK(engine_violations("#include \"framework/engine/kernels.hpp\"\n") == "");
  CHECK(engine_violations("#include \"framework/core/dims.hpp\"\n") != "");
  CHECK(engine_violations("#include \"models/gpt.hpp\"\n") != "");
}
