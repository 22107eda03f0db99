// docs/exercises.md cannot rot: every exercise has a check and an answer, and every check block
// (a fenced block tagged `check`) runs as written, from a directory laid out like the repository
// root (build/headgrad, build/docs/exercises/, tests/), exits 0 and prints each of its
// `# expect: TEXT` lines. A check that tests a change the learner makes (`# solved by: FILE`)
// must fail on the repository as it is and pass with that solution: a build with the patch
// applied, or the exercise program's solution, stands in for the unsolved program.
// The backprop exercises (docs/exercises/*.cpp): each skeleton fails every tensor it leaves TODO,
// its solution passes them all, and the solution is the skeleton with the TODOs filled in.
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
  std::string solved_by; // the solution that makes it pass, "" when the repository as it is does
};

const std::string kSource = HEADGRAD_SOURCE_DIR;
const std::string kExercises = kSource + "/docs/exercises.md";
const fs::path kPrograms = HEADGRAD_EXERCISE_PROGRAMS; // build/docs/exercises

std::vector<CheckBlock> check_blocks(const std::string& markdown) {
  std::vector<CheckBlock> blocks;
  std::string exercise;
  bool inside = false;
  for (const std::string& line : lines_of(markdown)) {
    if (!inside && test_support::starts_with(line, "## ")) exercise = line.substr(3);
    if (!inside && line == "```check") {
      inside = true;
      blocks.push_back({exercise, "", {}, ""});
      continue;
    }
    if (inside && line == "```") {
      inside = false;
      continue;
    }
    if (!inside) continue;
    blocks.back().script += line + "\n";
    if (test_support::starts_with(line, "# expect: ")) blocks.back().expects.push_back(line.substr(10));
    if (test_support::starts_with(line, "# solved by: ")) blocks.back().solved_by = line.substr(13);
  }
  REQUIRE_FALSE(inside); // an unclosed block
  return blocks;
}

// The programs a solution replaces: docs/exercises/solutions/NN-name.patch is built into
// headgrad_solved_NN, which stands for build/headgrad; docs/exercises/solutions/NAME.cpp is the
// program exercise_NAME_solution, which stands for exercise_NAME.
std::vector<std::pair<std::string, fs::path>> solved_programs(const std::string& solution) {
  const fs::path file = fs::path(solution).filename();
  if (file.extension() == ".patch")
    return {{"build/headgrad", kPrograms / ("headgrad_solved_" + file.string().substr(0, 2))}};
  if (file.extension() == ".cpp")
    return {{"build/docs/exercises/exercise_" + file.stem().string(),
             kPrograms / ("exercise_" + file.stem().string() + "_solution")}};
  FAIL("# solved by: names a .patch or a .cpp in docs/exercises/solutions/, got ", solution);
  return {};
}

// A directory laid out like the repository root: build/headgrad, the exercise programs, tests/;
// with a solution, its programs in place of the unsolved ones.
void lay_out_root(const fs::path& root, const std::string& solution) {
  fs::create_directories(root / "build" / "docs" / "exercises");
  std::vector<std::pair<std::string, fs::path>> programs = {{"build/headgrad", HEADGRAD_CLI}};
  for (const auto& e : fs::directory_iterator(kPrograms))
    if (e.is_regular_file() && test_support::starts_with(e.path().filename().string(), "exercise_"))
      programs.push_back({"build/docs/exercises/" + e.path().filename().string(), e.path()});
  if (!solution.empty())
    for (const auto& [where, program] : solved_programs(solution)) {
      INFO("the build of ", solution, " (docs/exercises/CMakeLists.txt; a .patch needs Debian's patch)");
      REQUIRE(fs::exists(program));
      for (auto& p : programs)
        if (p.first == where) p.second = program;
    }
  for (const auto& [where, program] : programs) fs::create_symlink(program, root / where);
  fs::create_directory_symlink(fs::path(kSource) / "tests", root / "tests");
}

struct CheckRun {
  int rc;
  std::string out, err;
  bool printed_all(const std::vector<std::string>& expects) const {
    for (const auto& e : expects)
      if (!contains(out, e)) return false;
    return true;
  }
};

CheckRun run_check(const CheckBlock& b, const fs::path& root, int n) {
  const std::string out = (root / fmt::format("check{}.out", n)).string();
  const std::string err = (root / fmt::format("check{}.err", n)).string();
  const pid_t pid = test_support::spawn({"/bin/sh", "-ec", b.script}, out, err, root.string());
  const int rc = test_support::wait_for(pid, 300);
  return {rc, test_support::read_file(out), test_support::read_file(err)};
}

// The names of the tensors a skeleton leaves to the learner: its `TODO(name)` markers, in order.
std::vector<std::string> todo_names(const std::string& source) {
  std::vector<std::string> names;
  const std::regex todo(R"(// TODO\((\w+)\))");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), todo); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

// The report line of tensor `name` ("  dW_o  [6, 6]  max |diff| 1.1e-16  PASS"), or "".
std::string report_line(const std::string& out, const std::string& name) {
  for (const std::string& line : lines_of(out))
    if (test_support::starts_with(line, "  " + name + " ")) return line;
  return "";
}

struct Program {
  int rc;
  std::string out;
};
Program run_program(const fs::path& program) {
  test_support::TempDir dir("test_exercises");
  const int rc = test_support::wait_for(test_support::spawn({program.string()}, dir / "out", dir / "err"), 120);
  return {rc, test_support::read_file(dir / "out") + test_support::read_file(dir / "err")};
}

} // namespace

TEST_CASE("exercises: each numbered, each with a check and an answer") {
  const std::string md = test_support::read_file(kExercises);
  REQUIRE_FALSE(md.empty());
  const std::regex heading(R"(^## (\d+)\. )");
  std::vector<int> numbers;
  for (const std::string& line : lines_of(md)) {
    std::smatch m;
    if (std::regex_search(line, m, heading)) numbers.push_back(std::stoi(m[1]));
  }
  CHECK(numbers.size() >= 12);
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

TEST_CASE("exercises: every check block prints what it expects, a solved one only with its solution") {
  const auto blocks = check_blocks(test_support::read_file(kExercises));
  REQUIRE(blocks.size() >= 12);
  test_support::TempDir dir("test_exercises");
  lay_out_root(dir.path / "repo", "");
  int n = 0, solved = 0;
  for (const CheckBlock& b : blocks) {
    CAPTURE(b.exercise);
    CAPTURE(b.script);
    const CheckRun as_is = run_check(b, dir.path / "repo", n++);
    INFO("stdout: ", as_is.out.substr(0, 4000), "\nstderr: ", as_is.err.substr(0, 2000));
    if (b.solved_by.empty()) {
      CHECK(as_is.rc == 0);
      for (const std::string& e : b.expects) {
        CAPTURE(e);
        CHECK(contains(as_is.out, e));
      }
      continue;
    }
    // the unsolved repository must not pass the check: it tests the answer
    CHECK_FALSE((as_is.rc == 0 && as_is.printed_all(b.expects)));
    const fs::path root = dir.path / fmt::format("solved{}", solved++);
    lay_out_root(root, b.solved_by);
    const CheckRun with = run_check(b, root, n++);
    INFO("with ", b.solved_by, ": stdout: ", with.out.substr(0, 4000), "\nstderr: ", with.err.substr(0, 2000));
    CHECK(with.rc == 0);
    for (const std::string& e : b.expects) {
      CAPTURE(e);
      CHECK(contains(with.out, e));
    }
  }
  CHECK(solved >= 4); // exercises 8, 9 and the two programs
}

TEST_CASE("backprop exercises: a skeleton fails every TODO tensor, its solution passes every one") {
  for (const std::string name : {"attention_backward", "layernorm_cross_entropy"}) {
    CAPTURE(name);
    const std::vector<std::string> todos =
        todo_names(test_support::read_file(kSource + "/docs/exercises/" + name + ".cpp"));
    CHECK(todos.size() >= 7);
    const Program skeleton = run_program(kPrograms / ("exercise_" + name));
    const Program solution = run_program(kPrograms / ("exercise_" + name + "_solution"));
    INFO("skeleton:\n", skeleton.out, "\nsolution:\n", solution.out);
    CHECK(skeleton.rc == 1);
    CHECK(solution.rc == 0);
    for (const std::string& t : todos) {
      CAPTURE(t);
      const std::string unsolved = report_line(skeleton.out, t), solved = report_line(solution.out, t);
      REQUIRE_FALSE(unsolved.empty());
      REQUIRE_FALSE(solved.empty());
      CHECK(unsolved.ends_with(" FAIL"));
      CHECK(contains(unsolved, "not computed"));
      CHECK(solved.ends_with(" PASS"));
    }
    // one line per tensor: the TODO tensors and nothing else
    std::size_t tensor_lines = 0;
    for (const std::string& line : lines_of(skeleton.out))
      tensor_lines += test_support::starts_with(line, "  ") && line.ends_with(" FAIL");
    CHECK(tensor_lines == todos.size());
    CHECK(contains(skeleton.out, fmt::format("{0} of {0} tensors FAIL", todos.size())));
    CHECK(contains(solution.out, fmt::format("all {} tensors PASS", todos.size())));
  }
}

TEST_CASE("backprop exercises: the solution is the skeleton with the TODOs filled in") {
  for (const std::string name : {"attention_backward", "layernorm_cross_entropy"}) {
    CAPTURE(name);
    const auto skeleton = lines_of(test_support::read_file(kSource + "/docs/exercises/" + name + ".cpp"));
    const auto solution = lines_of(test_support::read_file(kSource + "/docs/exercises/solutions/" + name + ".cpp"));
    REQUIRE_FALSE(skeleton.empty());
    // every line of the skeleton but its TODO markers is in the solution, in the same order
    std::size_t at = 0;
    for (const std::string& line : skeleton) {
      if (contains(line, "// TODO(")) continue;
      while (at < solution.size() && solution[at] != line) ++at;
      INFO("skeleton line not in the solution (in order): ", line);
      REQUIRE(at < solution.size());
      ++at;
    }
    CHECK(todo_names(test_support::read_file(kSource + "/docs/exercises/solutions/" + name + ".cpp")).empty());
  }
}
