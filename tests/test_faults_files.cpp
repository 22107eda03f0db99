// Faults in the files a run reads back, through the real binary (HEADGRAD_CLI), each in its own
// scratch directory: a damaged metrics.csv on resume (fault 9), the text corpus by another path
// (fault 11), and what `headgrad plot` accepts from a metrics.csv (fault 14).
#include <doctest/doctest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/child_usage.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
namespace fs = std::filesystem;
using test_support::contains;
using test_support::read_file;
using test_support::TempDir;

namespace {

test_support::CliRun cli(const std::vector<std::string>& args, const fs::path& cwd) {
  return test_support::run_cli(args, cwd);
}

std::vector<std::string> tiny_run(const std::string& out, std::int64_t steps) {
  return {"train", "--task", "copy", "--batch", "8", "--d-model", "16", "--heads", "2", "--layers", "1",
          "--ffn", "32", "--max-len", "8", "--min-len", "2", "--vocab", "10", "--threads", "1",
          "--eval-every", "0", "--eval-count", "8", "--quiet", "--steps", std::to_string(steps), "--out", out};
}

// The steps of the step rows of a metrics.csv's text, in order.
std::vector<std::int64_t> step_rows(const std::string& csv) {
  std::vector<std::int64_t> out;
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line); // the header
  while (std::getline(lines, line)) {
    const auto comma = line.find(',');
    if (comma != std::string::npos && comma + 1 < line.size() && line[comma + 1] != ',')
      out.push_back(std::stoll(line.substr(0, comma)));
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

const std::string kHeader = "step,loss,lr,tokens_per_s,eval_loss,token_acc,seq_acc\n";

} // namespace

// Fault 9: one damaged line of metrics.csv made a valid checkpoint unresumable ("metrics.csv:3:
// not a row of 7 fields"). The checkpoint is the truth: the damaged log is kept aside under
// another name, said in one line, and a fresh log continues.
TEST_CASE("fault 9: a damaged metrics.csv is kept aside and the resumed run continues a fresh log") {
  TempDir dir;
  const std::string out = dir / "run";
  REQUIRE(cli(tiny_run(out, 4), dir.path).rc == 0);
  std::string csv = read_file(out + "/metrics.csv");
  const auto rows = lines_of(csv);
  REQUIRE(rows.size() >= 5);
  const std::string damaged = rows[0] + "\n" + rows[1] + "\n" + "2,0.9\x01garbage\n" + rows[3] + "\n";
  test_support::write_file(out + "/metrics.csv", damaged);
  std::vector<std::string> resume = tiny_run(out, 6);
  resume.insert(resume.end(), {"--resume", out + "/model.safetensors"});
  const auto r = cli(resume, dir.path);
  INFO("stderr: ", r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err_lines().empty()); // no error: one note about the log (besides any start-up note)
  std::vector<std::string> notes;
  for (const auto& l : lines_of(r.err))
    if (contains(l, "metrics.csv")) notes.push_back(l);
  REQUIRE(notes.size() == 1);
  CHECK(test_support::is_note(notes[0]));
  CHECK(contains(notes[0], "metrics.csv:3"));
  CHECK(contains(notes[0], "metrics.csv.damaged"));
  CHECK(read_file(out + "/metrics.csv.damaged") == damaged); // kept as it was, byte for byte
  const std::string fresh = read_file(out + "/metrics.csv");
  CHECK(fresh.rfind(kHeader, 0) == 0);
  CHECK(step_rows(fresh) == std::vector<std::int64_t>{5, 6});
  // a second damaged log does not replace the first one kept aside
  test_support::write_file(out + "/metrics.csv", kHeader + "x,y\n");
  std::vector<std::string> again = tiny_run(out, 7);
  again.insert(again.end(), {"--resume", out + "/model.safetensors"});
  const auto r2 = cli(again, dir.path);
  REQUIRE_MESSAGE(r2.rc == 0, r2.err);
  CHECK(read_file(out + "/metrics.csv.damaged") == damaged);
  CHECK(read_file(out + "/metrics.csv.damaged.1") == kHeader + "x,y\n");
  CHECK(step_rows(read_file(out + "/metrics.csv")) == std::vector<std::int64_t>{7});
  // a file whose first line is not the log's header is not a log of ours: refused, not moved
  test_support::write_file(out + "/metrics.csv", "my notes\n");
  std::vector<std::string> notes_file = tiny_run(out, 8);
  notes_file.insert(notes_file.end(), {"--resume", out + "/model.safetensors"});
  CHECK(contains(test_support::refusal_line(cli(notes_file, dir.path)), "not a headgrad metrics.csv"));
  CHECK(read_file(out + "/metrics.csv") == "my notes\n");
}

// Fault 11: a relative --text was stored as given, so a run resumed from another directory could
// not read it, and the same file by its absolute path was refused as another text. The checkpoint
// keeps the corpus's absolute path and its fingerprint; any path to the same contents is accepted.
TEST_CASE("fault 11: a text run resumes from another directory, and from any path to the same contents") {
  TempDir dir;
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  std::string text;
  for (int i = 0; i < 80; ++i) text += "one two three four five six seven eight nine ten\n";
  test_support::write_file(dir / "a/corpus.txt", text);
  test_support::write_file(dir / "b/copy.txt", text);
  test_support::write_file(dir / "b/other.txt", text + "eleven\n");
  const std::vector<std::string> tiny = {"train", "--task", "text", "--batch", "4", "--layers", "1", "--d-model", "16",
                                         "--heads", "2", "--ffn", "32", "--context", "16", "--eval-count", "2",
                                         "--threads", "1", "--quiet"};
  auto with = [](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const std::string out = dir / "run";
  const std::string model = out + "/model.safetensors";
  const auto first = cli(with(tiny, {"--text", "corpus.txt", "--steps", "2", "--out", out}), dir / "a");
  REQUIRE_MESSAGE(first.rc == 0, first.err);
  // from another working directory, without --text: the stored path is absolute
  const auto moved = cli(with(tiny, {"--resume", model, "--steps", "3", "--out", out}), dir / "b");
  CHECK_MESSAGE(moved.rc == 0, moved.err);
  // the same file by its absolute path, and a copy of it elsewhere: the same contents
  const auto absolute = cli(with(tiny, {"--resume", model, "--text", dir / "a/corpus.txt", "--steps", "4",
                                        "--out", out}),
                            dir / "b");
  CHECK_MESSAGE(absolute.rc == 0, absolute.err);
  const auto copy = cli(with(tiny, {"--resume", model, "--text", "copy.txt", "--steps", "5", "--out", out}), dir / "b");
  CHECK_MESSAGE(copy.rc == 0, copy.err);
  // other contents: one line naming the file
  const auto other = cli(with(tiny, {"--resume", model, "--text", "other.txt", "--steps", "6", "--out", out}), dir / "b");
  const std::string line = test_support::refusal_line(other);
  CHECK(contains(line, "other.txt"));
  CHECK(contains(line, "another text"));
}

// Fault 14: `plot` said "500 steps" for a 2000-step run (it counted plotted points), took steps
// written 1e300 or nan and printed 300-digit numbers, and read a 200 MB single-line file whole.
TEST_CASE("fault 14: plot reports the run's steps, refuses steps that are not step numbers, and never holds a huge line") {
  TempDir dir;
  fs::create_directories(dir / "long");
  std::string csv = kHeader;
  for (int s = 1; s <= 2000; ++s) csv += fmt::format("{},{:.4f},0.01,100.0,,,\n", s, 3.0 - s * 1e-3);
  csv += "2000,,,,1.5,0.5,0.25\n";
  test_support::write_file(dir / "long/metrics.csv", csv);
  const auto r = cli({"plot", dir / "long", "--out", dir / "long.svg"}, dir.path);
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  CHECK(contains(r.out, "long: 2000 steps"));

  for (const std::string step : {"1e300", "nan", "inf", "-3", "2.5", "99999999999999999999999"}) {
    CAPTURE(step);
    fs::create_directories(dir / "bad");
    test_support::write_file(dir / "bad/metrics.csv", kHeader + "1,2.0,0.01,100.0,,,\n" + step + ",2.0,0.01,100.0,,,\n");
    const auto b = cli({"plot", dir / "bad", "--out", dir / "bad.svg"}, dir.path);
    const std::string line = test_support::refusal_line(b);
    CHECK(contains(line, "metrics.csv:3"));
    CHECK(contains(line, "step"));
    CHECK(line.size() < 300);
  }

  // a 64 MiB line: refused once it is longer than any row can be, with the memory of a short file
  fs::create_directories(dir / "huge");
  {
    std::ofstream f(dir / "huge/metrics.csv", std::ios::binary);
    f << kHeader << "1,";
    const std::string chunk(1 << 20, '7');
    for (int i = 0; i < 64; ++i) f << chunk;
    f << ",0.01,100.0,,,\n";
  }
  const auto small = child_usage::run({"plot", dir / "long", "--out", dir / "s.svg"}, dir.path);
  REQUIRE(small.rc == 0);
  const auto huge = child_usage::run({"plot", dir / "huge", "--out", dir / "h.svg"}, dir.path);
  const std::string line = test_support::refusal_line(huge);
  CHECK(contains(line, "metrics.csv:2"));
  CHECK(contains(line, "longer than"));
  MESSAGE("plot of a 64 MiB line: peak ", huge.max_rss_kib / 1024, " MiB; of a 2000-step log: ", small.max_rss_kib / 1024,
          " MiB");
  if (child_usage::kMeasuresMemory) CHECK(huge.max_rss_kib < small.max_rss_kib + 8 * 1024);
}
