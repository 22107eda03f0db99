// data/token_files.hpp: nanoGPT's prepared train.bin / val.bin (uint16 token ids) as a data
// source - the fixture tests/reference/fixtures/tokens/ (written by
// tests/reference/make_token_files.py), batches checked against the files' bytes, bad files
// refused in one line, memory that does not grow with the files, and `headgrad train --task
// tokens --data DIR` training a GPT on them.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/token_files.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
namespace fs = std::filesystem;
using test_support::contains;
using test_support::error_of;
using test_support::TempDir;

namespace {

const std::string kFixture = std::string(HEADGRAD_SOURCE_DIR) + "/tests/reference/fixtures/tokens";

std::vector<std::uint16_t> read_tokens(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::uint16_t> out(bytes.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint16_t>(static_cast<unsigned char>(bytes[2 * i]) |
                                        (static_cast<unsigned char>(bytes[2 * i + 1]) << 8)); // little-endian
  return out;
}

void write_tokens(const std::string& path, const std::vector<std::uint16_t>& tokens) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(tokens.data()),
                                               static_cast<std::streamsize>(tokens.size() * 2));
}

// Each row of b is a window of `tokens`, its targets the same window one token on.
bool rows_are_windows(const data::Batch& b, const std::vector<std::uint16_t>& tokens) {
  const auto x = b.tokens.to_int_vector(), y = b.targets.to_int_vector();
  const std::int64_t B = b.tokens.shape()[0], T = b.tokens.shape()[1];
  for (std::int64_t r = 0; r < B; ++r) {
    bool found = false;
    for (std::size_t o = 0; o + static_cast<std::size_t>(T) < tokens.size() && !found; ++o) {
      bool same = true;
      for (std::int64_t t = 0; t < T && same; ++t)
        same = x[static_cast<std::size_t>(r * T + t)] == tokens[o + static_cast<std::size_t>(t)] &&
               y[static_cast<std::size_t>(r * T + t)] == tokens[o + static_cast<std::size_t>(t) + 1];
      found = same;
    }
    if (!found) return false;
  }
  return true;
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

} // namespace

static_assert(data::DataSource<data::TokenFiles>);

TEST_CASE("token files: nanoGPT's train.bin / val.bin read as windows and next-token targets, vocabulary from meta.json") {
  const data::TokenFiles files(kFixture, 16, /*seed=*/7);
  CHECK(files.vocab_size() == 300);
  CHECK(files.train_tokens() == 3000);
  CHECK(files.val_tokens() == 600);
  CHECK(files.sequence_length() == 16);
  const data::Batch b = files.batch(3, 4);
  CHECK(b.tokens.shape() == Dims{4, 16});
  CHECK(b.targets.shape() == Dims{4, 16});
  CHECK(b.valid_lens.to_int_vector() == std::vector<std::int64_t>(4, 16));
  CHECK(b.valid_tokens == 64);
  CHECK(rows_are_windows(b, read_tokens(kFixture + "/train.bin")));
  CHECK(files.batch(3, 4).tokens.to_int_vector() == b.tokens.to_int_vector()); // a pure function of the index
  CHECK(files.batch(4, 4).tokens.to_int_vector() != b.tokens.to_int_vector());
  const data::TokenFiles other_seed(kFixture, 16, 8);
  CHECK(other_seed.batch(3, 4).tokens.to_int_vector() != b.tokens.to_int_vector());
  // the held-out set: from val.bin only; read in chunks it is the same set, and a prefix of a bigger one
  const data::Batch eval = files.eval_set(5);
  CHECK(rows_are_windows(eval, read_tokens(kFixture + "/val.bin")));
  const auto reader = files.eval_reader(5);
  const data::Batch first = reader(3), rest = reader(3), none = reader(3);
  CHECK(first.tokens.shape() == Dims{3, 16});
  CHECK(rest.tokens.shape() == Dims{2, 16});
  CHECK_FALSE(none.tokens.defined());
  auto joined = first.tokens.to_int_vector();
  for (auto v : rest.tokens.to_int_vector()) joined.push_back(v);
  CHECK(joined == eval.tokens.to_int_vector());
  const auto bigger = files.eval_set(8).tokens.to_int_vector();
  CHECK(std::vector<std::int64_t>(bigger.begin(), bigger.begin() + 5 * 16) == eval.tokens.to_int_vector());
  // a vocabulary given overrides meta.json
  CHECK(data::TokenFiles(kFixture, 16, 7, 512).vocab_size() == 512);
}

TEST_CASE("token files: bad files are refused in one line naming the file") {
  TempDir dir;
  const std::string d = dir.path.string();
  const auto refusal = [&](std::int64_t context, std::int64_t vocab) {
    return error_of<std::invalid_argument>([&] { data::TokenFiles files(d, context, 1, vocab); });
  };
  const std::vector<std::uint16_t> ok(100, 5);
  CHECK(contains(refusal(8, 0), d + "/meta.json: cannot be read"));
  std::ofstream(d + "/meta.json") << "{\"vocab\": 300}";
  CHECK(contains(refusal(8, 0), d + "/meta.json: has no \"vocab_size\""));
  std::ofstream(d + "/meta.json") << "{\"vocab_size\": 70000}";
  CHECK(contains(refusal(8, 0), "vocab_size 70000 is outside [2, 65536]"));
  std::ofstream(d + "/meta.json") << "{\"block_size\": 8, \"vocab_size\": 300}";
  CHECK(contains(refusal(8, 0), d + "/train.bin: cannot be opened"));
  write_tokens(d + "/train.bin", ok);
  CHECK(contains(refusal(8, 0), d + "/val.bin: cannot be opened"));
  std::ofstream(d + "/val.bin", std::ios::binary) << "abc"; // 3 bytes
  CHECK(contains(refusal(8, 0), d + "/val.bin: has 3 bytes, an odd number"));
  write_tokens(d + "/val.bin", std::vector<std::uint16_t>(8, 1));
  CHECK(contains(refusal(8, 0), d + "/val.bin: holds 8 tokens, too few for one window of 8"));
  std::ofstream(d + "/val.bin", std::ios::binary).close(); // empty
  CHECK(contains(refusal(8, 0), d + "/val.bin: holds 0 tokens"));
  fs::remove(d + "/val.bin");
  fs::create_directory(d + "/val.bin");
  CHECK(contains(refusal(8, 0), d + "/val.bin: is not a regular file"));
  fs::remove(d + "/val.bin");
  write_tokens(d + "/val.bin", ok);
  const data::TokenFiles fine(d, 8, 1);
  CHECK(fine.batch(0, 2).tokens.to_int_vector() == std::vector<std::int64_t>(16, 5));
  // a token outside the vocabulary: refused by the batch that reads it, naming file and position
  write_tokens(d + "/train.bin", std::vector<std::uint16_t>(100, 300));
  const data::TokenFiles out_of_range(d, 8, 1);
  const std::string msg = error_of<std::invalid_argument>([&] { out_of_range.batch(0, 1); });
  CHECK(contains(msg, d + "/train.bin: token 300 at position "));
  CHECK(contains(msg, "is not below the vocabulary size 300"));
  CHECK(msg.find('\n') == std::string::npos);
}

TEST_CASE("token files: memory-mapped, the memory a run keeps does not grow with the files") {
  TempDir dir;
  const std::string d = dir.path.string();
  // 256 MiB of zeros (sparse: no disk blocks) per split
  for (const char* name : {"/train.bin", "/val.bin"}) {
    std::ofstream f(d + name, std::ios::binary);
    f.seekp((256ll << 20) - 1);
    f.put('\0');
  }
  const long before = rss_kib();
  const data::TokenFiles files(d, 64, 3, 50257);
  for (std::uint64_t i = 0; i < 20; ++i) (void)files.batch(i, 8);
  (void)files.eval_set(32);
  const long grown = rss_kib() - before;
  MESSAGE("RSS grew by " << grown << " KiB over 512 MiB of token files");
  CHECK(grown < 16 * 1024); // 192 windows touch at most 2 pages each
}

TEST_CASE("headgrad train --task tokens --data DIR trains a GPT on token files, and eval reads them back") {
  TempDir dir;
  const std::string out = (dir.path / "run").string();
  const test_support::CliRun r =
      test_support::run_cli({"train", "--task", "tokens", "--data", kFixture, "--steps", "60", "--batch", "8",
                             "--context", "16", "--d-model", "32", "--heads", "2", "--layers", "1", "--ffn", "64",
                             "--lr", "0.01", "--warmup", "5", "--eval-count", "16", "--threads", "1", "--out", out},
                            dir.path);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "token files " + kFixture));
  // untrained, about ln 300 = 5.7 per token; the phrases are learnable
  const auto at = r.out.find("val loss ");
  REQUIRE(at != std::string::npos);
  const double val_loss = std::stod(r.out.substr(at + 9));
  MESSAGE("val loss after 60 steps: " << val_loss);
  CHECK(val_loss < 4.5);
  const test_support::CliRun e =
      test_support::run_cli({"eval", "--checkpoint", out + "/model.safetensors", "--count", "8"}, dir.path);
  INFO("eval stdout: ", e.out, "\neval stderr: ", e.err);
  CHECK(e.rc == 0);
  CHECK(contains(e.out, "from " + kFixture));
  // no --data: one line
  const test_support::CliRun missing = test_support::run_cli({"train", "--task", "tokens", "--steps", "1"}, dir.path);
  CHECK(contains(test_support::refusal_line(missing), "--task tokens reads the token files of --data DIR"));
  const test_support::CliRun bad =
      test_support::run_cli({"train", "--task", "tokens", "--data", (dir.path / "nowhere").string(), "--steps", "1",
                             "--out", (dir.path / "bad").string()},
                            dir.path);
  CHECK(contains(test_support::refusal_line(bad), "nowhere/meta.json: cannot be read"));
}
