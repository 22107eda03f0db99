// docs/exercises.md cannot rot: every exercise has a check and an answer, and every check block
// (a fenced block tagged `check`) runs as written, from a directory laid out like the repository
// root (build/headgrad, tests/), exits 0 and prints each of its `# expect: TEXT` lines.
#include <doctest/doctest.h>

#include <regex>

#include "tests/test_support.hpp"

using test_support::contains;
using test_support::lines_of;
namespace fs = std::filesystem;

namespace {

struct CheckBlock {
  std::string exercise; // the heading it belongs to
  std::string script;   // its lines, for sh -e
  std::vector<std::string> expects;
};

const std::string kExercises = std::string(HEADGRAD_SOURCE_DIR) + "/docs/exercises.md";

std::vector<CheckBlock> check_blocks(const std::string& markdown) {
  std::vector<CheckBlock> blocks;
  std::string exercise;
  bool inside = false;
  for (const std::string& line : lines_of(markdown)) {
    if (!inside && test_support::starts_with(line, "## ")) exercise = line.substr(3);
    if (!inside && line == "```check") {
      inside = true;
      blocks.push_back({exercise, "", {}});
      continue;
    }
    if (inside && line == "```") {
      inside = false;
      continue;
    }
    if (!inside) continue;
    blocks.back().script += line + "\n";
    if (test_support::starts_with(line, "# expect: ")) blocks.back().expects.push_back(line.substr(10));
  }
  REQUIRE_FALSE(inside); // an unclosed block
  return blocks;
}

} // namespace

TEST_CASE("exercises: eight or more, each with a check and an answer") {
  const std::string md = test_support::read_file(kExercises);
  REQUIRE_FALSE(md.empty());
  const std::regex heading(R"(^## (\d+)\. )");
  std::vector<int> numbers;
  for (const std::string& line : lines_of(md)) {
    std::smatch m;
    if (std::regex_search(line, m, heading)) numbers.push_back(std::stoi(m[1]));
  }
  CHECK(numbers.size() >= 8);
  const auto blocks = check_blocks(md);
  const std::string answers = md.substr(md.find("## Answers"));
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    CAPTURE(numbers[i]);
    CHECK(numbers[i] == static_cast<int>(i + 1));
    std::size_t checks = 0;
    for (const auto& b : blocks) checks += test_support::starts_with(b.exercise, std::to_string(numbers[i]) + ". ");
    CHECK(checks >= 1);
    CHECK(contains(answers, fmt::format("\n**{}.** ", numbers[i])));
  }
}

TEST_CASE("exercises: every check block runs and prints what it expects") {
  const auto blocks = check_blocks(test_support::read_file(kExercises));
  REQUIRE(blocks.size() >= 8);
  test_support::TempDir root("test_exercises");
  fs::create_directories(root.path / "build");
  fs::create_symlink(HEADGRAD_CLI, root.path / "build" / "headgrad");
  fs::create_directory_symlink(fs::path(HEADGRAD_SOURCE_DIR) / "tests", root.path / "tests");
  int n = 0;
  for (const CheckBlock& b : blocks) {
    CAPTURE(b.exercise);
    CAPTURE(b.script);
    const std::string out = root / fmt::format("check{}.out", n), err = root / fmt::format("check{}.err", n);
    ++n;
    const int rc = test_support::wait_for(test_support::spawn({"/bin/sh", "-ec", b.script}, out, err, root.path.string()),
                                          300);
    const std::string printed = test_support::read_file(out);
    INFO("stdout: ", printed.substr(0, 4000), "\nstderr: ", test_support::read_file(err));
    CHECK(rc == 0);
    for (const std::string& e : b.expects) {
      CAPTURE(e);
      CHECK(contains(printed, e));
    }
  }
}
