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
// headgrad_solved_NN, which stands for build/headgrad, and into exercise_X_solved_NN, which stands
// for the exercise program exercise_X; docs/exercises/solutions/NAME.cpp is the program
// exercise_NAME_solution, which stands for exercise_NAME.
std::vector<std::pair<std::string, fs::path>> solved_programs(const std::string& solution) {
  const fs::path file = fs::path(solution).filename();
  if (file.extension() == ".patch") {
    const std::string suffix = "_solved_" + file.string().substr(0, 2);
    std::vector<std::pair<std::string, fs::path>> programs = {{"build/headgrad", kPrograms / ("headgrad" + suffix)}};
    for (const auto& e : fs::directory_iterator(kPrograms)) {
      const std::string name = e.path().filename().string();
      if (test_support::starts_with(name, "exercise_") && name.ends_with(suffix))
        programs.push_back({"build/docs/exercises/" + name.substr(0, name.size() - suffix.size()), e.path()});
    }
    return programs;
  }
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
Program run_program(const fs::path& program, const std::vector<std::string>& args = {}, double timeout_s = 120) {
  test_support::TempDir dir("test_exercises");
  std::vector<std::string> argv = {program.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  const int rc = test_support::wait_for(test_support::spawn(argv, dir / "out", dir / "err"), timeout_s);
  return {rc, test_support::read_file(dir / "out") + test_support::read_file(dir / "err")};
}

// The names of the tensors whose report line says FAIL, in order.
std::vector<std::string> failed_tensors(const std::string& out) {
  std::vector<std::string> names;
  for (const std::string& line : lines_of(out))
    if (test_support::starts_with(line, "  ") && line.ends_with(" FAIL")) {
      const std::size_t end = line.find(' ', 2);
      names.push_back(line.substr(2, end - 2));
    }
  return names;
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

// The wrong answers of tests/exercise_mutants/ (built by docs/exercises/CMakeLists.txt): a check that
// can be fooled is no check. The shortcut of reading autograd's own gradients off the inputs finds
// none (the steps get tensors without gradients), a dL left out shows (the check's dL is 1/3), a
// forgotten transpose fails on its shape (cross-attention: Tq != Tk), and so does every other line
// that changed - and nothing else.
TEST_CASE("backprop exercises: wrong answers fail exactly the tensors they get wrong") {
  struct Case {
    const char* program;
    std::vector<std::string> failing;
    const char* said; // a line of the report that says why
  };
  for (const Case& c : {Case{"exercise_attention_backward_wrong", {"dW_o", "dP", "dKh", "dW_q", "dX"},
                             "this step threw: matmul: inner dimensions differ"},
                        Case{"exercise_layernorm_cross_entropy_wrong", {"dlogits", "dW", "db", "dgamma", "dbeta", "dx"},
                             "dW       [4, 5]         not computed"}}) {
    CAPTURE(c.program);
    const Program p = run_program(kPrograms / c.program);
    INFO(p.out);
    CHECK(p.rc == 1);
    CHECK(failed_tensors(p.out) == c.failing);
    CHECK(contains(p.out, c.said));
  }
}

// --train: the learner's backward trains the sort model (docs/exercises/attention_train.hpp). Not
// before every tensor passes; and a backward that is right in float64 but wrong in float32 (where
// the check cannot see it) fails on the first steps' losses beside autograd's.
TEST_CASE("attention exercise --train: refused until every tensor passes; a float32-only mistake fails the losses") {
  const Program skeleton = run_program(kPrograms / "exercise_attention_backward", {"--train"});
  INFO(skeleton.out);
  CHECK(skeleton.rc == 1);
  CHECK(contains(skeleton.out, "--train: every tensor must PASS first"));
  CHECK_FALSE(contains(skeleton.out, "training the sort model"));

  const Program wrong = run_program(kPrograms / "exercise_attention_backward_wrong_in_float32", {"--train"});
  INFO(wrong.out);
  CHECK(wrong.rc == 1);
  CHECK(contains(wrong.out, "all 18 tensors PASS"));
  CHECK(contains(wrong.out, "FAIL: the losses differ by more than float32 rounding"));
  CHECK_FALSE(contains(wrong.out, "held-out sequence accuracy"));

  const Program usage = run_program(kPrograms / "exercise_attention_backward_solution", {"--trian"});
  CHECK(usage.rc == 2);
  CHECK(contains(usage.out, "[--train]"));
}

// Exercise 9's check tests the op at the inputs where a naive one breaks (docs/exercises/softplus.cpp):
// log(1 + e^x) as written (tests/exercise_mutants/09-softplus-naive.patch) passes the gradient
// check's random inputs, not this.
TEST_CASE("exercise 9: the check refuses a naive softplus, at +-1000 and the float32 and float64 edges") {
  const Program naive = run_program(kPrograms / "exercise_softplus_naive");
  INFO(naive.out);
  CHECK(naive.rc == 1);
  for (const char* line : {"float32  x = 1000            softplus inf", "float32  x = 89              softplus inf",
                           "float64  x = 1000            softplus inf", "float64  x = -100            softplus 0 "})
    CHECK(contains(naive.out, line));
  CHECK(contains(naive.out, "softplus and its gradient: 11 of 26 inputs FAIL"));
  const Program unsolved = run_program(kPrograms / "exercise_softplus");
  CHECK(unsolved.rc == 1);
  CHECK(contains(unsolved.out, "ops::softplus is not declared yet"));
  const Program solved = run_program(kPrograms / "exercise_softplus_solved_09");
  INFO(solved.out);
  CHECK(solved.rc == 0);
  CHECK(contains(solved.out, "softplus and its gradient: all 26 inputs PASS"));
}

// A half-written step still builds: the skeletons are compiled with the project's warnings shown,
// not as errors (docs/exercises/CMakeLists.txt), while the solutions keep -Werror. The options are
// the targets' own (tests/CMakeLists.txt); the file is a step left half-way, as a learner leaves it.
TEST_CASE("exercises: a half-written step builds with its warnings shown; the solutions keep -Werror") {
  auto options_of = [](const std::string& joined) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= joined.size()) {
      const std::size_t bar = std::min(joined.find('|', at), joined.size());
      if (bar > at) out.push_back(joined.substr(at, bar - at));
      at = bar + 1;
    }
    return out;
  };
  test_support::TempDir dir("test_exercises");
  const fs::path half = dir / "half_written.cpp";
  {
    std::ofstream f(half);
    f << "// step 1, half-way: the sizes read, nothing computed yet\n"
         "void step_W_o(const int* dY, int* dC) {\n  int rows = 3;\n}\n"
         "int main() { step_W_o(nullptr, nullptr); }\n";
  }
  auto compile = [&](const std::vector<std::string>& options, const std::string& tag) {
    std::vector<std::string> argv = {HEADGRAD_CXX};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"-std=c++20", "-fsyntax-only", half.string()});
    const int rc = test_support::wait_for(test_support::spawn(argv, dir / (tag + ".out"), dir / (tag + ".err"), "",
                                                          {{"LC_ALL", "C"}}), // quotes as 'rows'
                                      120);
    return Program{rc, test_support::read_file(dir / (tag + ".err"))};
  };
  const std::vector<std::string> skeleton = options_of(HEADGRAD_SKELETON_OPTIONS);
  const std::vector<std::string> solution = options_of(HEADGRAD_SOLUTION_OPTIONS);
  CAPTURE(HEADGRAD_SKELETON_OPTIONS);
  CAPTURE(HEADGRAD_SOLUTION_OPTIONS);
  for (const char* w : {"-Wall", "-Wextra"}) { // the warnings are there, in both
    CHECK(std::find(skeleton.begin(), skeleton.end(), w) != skeleton.end());
    CHECK(std::find(solution.begin(), solution.end(), w) != solution.end());
  }
  const Program as_skeleton = compile(skeleton, "skeleton");
  INFO("as a skeleton:\n", as_skeleton.out);
  CHECK(as_skeleton.rc == 0);
  CHECK(contains(as_skeleton.out, "warning: unused variable 'rows'"));
  CHECK_FALSE(contains(as_skeleton.out, "unused parameter")); // the skeleton's steps start that way
  const Program as_solution = compile(solution, "solution");
  INFO("as a solution:\n", as_solution.out);
  CHECK(as_solution.rc != 0);
  CHECK(contains(as_solution.out, "error: unused variable 'rows'"));
}
