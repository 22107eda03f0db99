// framework/io safetensors: round trips, the exact bytes of a hand-computed file, files written by
// another writer, every malformed-input refusal with its message, and the atomic save.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <random>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "framework/io/crc32c.hpp"
#include "framework/io/safetensors.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using namespace headgrad::io;
namespace fs = std::filesystem;
using test_support::contains;
using test_support::error_of;
using test_support::read_file;
using test_support::write_file;

namespace {

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}
// A file from a header text and data bytes, with no padding or checks: the hostile-input maker.
std::string file_of(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}
SafetensorsFile parse(const std::string& bytes) { return parse_safetensors(bytes.data(), bytes.size(), "bad.st"); }

// Parsing `bytes` must throw std::invalid_argument with one message "bad.st: <problem>" where
// <problem> contains `expected`.
#define CHECK_REFUSED(bytes, expected)                                                          \
  do {                                                                                          \
    const std::string msg_ = error_of<std::invalid_argument>([&] { (void)parse(bytes); });     \
    INFO("message: ", msg_);                                                                    \
    CHECK(msg_.rfind("bad.st: ", 0) == 0);                                                      \
    CHECK(msg_.find("bad.st: ", 1) == std::string::npos);                                       \
    CHECK(contains(msg_, expected));                                                            \
  } while (0)

// One valid entry, for building headers.
std::string entry(const std::string& dtype, const std::string& shape, std::uint64_t b, std::uint64_t e) {
  return fmt::format(R"({{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", dtype, shape, b, e);
}

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw()), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
}

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
// A set of tensors covering every dtype and layout the writer must handle.
NamedTensors sample_tensors() {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor base = Tensor::from({0, 1, 2, 3, 4, 5}, {2, 3});
  return {
      {"w.f32", Tensor::from({1.5, -2.25, 3e-38, inf, -0.0, 1e30}, {2, 3}, DType::f32)},
      {"w.f64", Tensor::from({1e-300, -nan, 0.1, -inf}, {4}, DType::f64)},
      {"tokens", Tensor::from_ints({std::numeric_limits<std::int64_t>::min(), -1, 0, 7,
                                    std::numeric_limits<std::int64_t>::max(), 42},
                                   {3, 2})},
      {"mask", Tensor::from({1, 0, 0, 1, 1, 0}, {2, 1, 3}, DType::bool8)},
      {"scalar", Tensor::scalar(3.25, DType::f64)},
      {"empty", Tensor::zeros({0, 3}, DType::f32)},
      {"empty_i64", Tensor::zeros({0}, DType::i64)},
      {"transposed", base.transpose(0, 1)},                                   // strides (1, 3)
      {"sliced", base.slice(1, 1, 3)},                                        // offset 1, strides (3, 1)
      {"permuted", Tensor::arange(24, DType::f64).reshape({2, 3, 4}).permute({2, 0, 1})},
      {"mask_t", Tensor::from({1, 1, 0, 0, 1, 0}, {2, 3}, DType::bool8).transpose(0, 1)},
      {"ünïcode name/with.dots", Tensor::from({1, 2}, {2}, DType::f32)},
  };
}

void check_same(const NamedTensors& expected, const SafetensorsFile& got) {
  REQUIRE(got.tensors.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, t] = expected[i];
    INFO("tensor ", name);
    CHECK(got.tensors[i].first == name);
    const Tensor& g = got.tensors[i].second;
    CHECK(g.dtype() == t.dtype());
    CHECK(g.shape() == t.shape());
    CHECK(g.is_contiguous());
    CHECK(bytes_of(g) == bytes_of(t)); // bit-exact, NaN payloads and -0.0 included
    CHECK(got.find(name) == &got.tensors[i].second);
  }
}

} // namespace

TEST_CASE("safetensors: round trip of every dtype and layout, in memory and on disk") {
  const NamedTensors tensors = sample_tensors();
  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"step", "1200"}, {"", ""}, {"note", "línea\n\"2\""}};
  const std::string bytes = encode_safetensors(tensors, meta);

  const SafetensorsFile mem = parse_safetensors(bytes.data(), bytes.size(), "mem");
  check_same(tensors, mem);
  CHECK(mem.metadata == meta);
  CHECK(mem.source == "mem");
  CHECK(mem.find("absent") == nullptr);
  CHECK(mem.at("scalar").item() == 3.25);
  CHECK(mem.at("scalar").dim() == 0);
  CHECK(mem.at("transposed").to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(mem.at("sliced").to_vector() == std::vector<double>{1, 2, 4, 5});
  CHECK(mem.at("mask_t").to_vector() == std::vector<double>{1, 0, 1, 1, 0, 0});
  const std::string missing = error_of<std::invalid_argument>([&] { (void)mem.at("nope"); });
  CHECK(contains(missing, "mem: no tensor named 'nope'"));

  // The header is padded so the data buffer starts 8-byte aligned.
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);

  const test_support::TempDir dir("test_safetensors");
  save_safetensors(dir / "a.safetensors", tensors, meta);
  CHECK(read_file(dir / "a.safetensors") == bytes); // save writes exactly what encode returns
  const SafetensorsFile disk = load_safetensors(dir / "a.safetensors");
  check_same(tensors, disk);
  CHECK(disk.metadata == meta);
  CHECK(disk.source == dir / "a.safetensors");
  CHECK(dir.temp_files().empty());

  // Loaded tensors are ordinary tensors: no history, own storage.
  CHECK(!disk.at("w.f32").requires_grad());
  CHECK(disk.at("w.f32").is_leaf());

  // No tensors, no metadata: the smallest valid file.
  const std::string empty = encode_safetensors({});
  CHECK(empty == le64(8) + "{}      ");
  CHECK(parse(empty).tensors.empty());
}

TEST_CASE("safetensors: byte-exact encoding of a hand-computed file") {
  // f32 [1, -2] = 00 00 80 3f | 00 00 00 c0 (IEEE-754, little-endian); bool [1, 0, 1] = 01 00 01.
  const std::string json =
      R"({"__metadata__":{"step":"7"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BOOL","shape":[3],"data_offsets":[8,11]}})";
  REQUIRE(json.size() == 137); // counted by hand: 28 (metadata) + 54 (a) + 55 (b)
  const std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) + json + std::string(7, ' ') +
                               std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x01\x00\x01", 11);
  REQUIRE(expected.size() == 8 + 144 + 11);
  const std::string got = encode_safetensors(
      {{"a", Tensor::from({1, -2}, {2}, DType::f32)}, {"b", Tensor::from({1, 0, 1}, {3}, DType::bool8)}},
      {{"step", "7"}});
  CHECK(got == expected);

  // And the same bytes read back.
  const SafetensorsFile f = parse(expected);
  CHECK(f.metadata.at("step") == "7");
  CHECK(f.at("a").to_vector() == std::vector<double>{1, -2});
  CHECK(f.at("b").dtype() == DType::bool8);
  CHECK(f.at("b").to_vector() == std::vector<double>{1, 0, 1});
}

TEST_CASE("safetensors: files as other writers make them") {
  SUBCASE("header order differs from data order; extra fields; space padding; escapes") {
    // Like the reference writer: entries sorted by name, not by offset; padded with spaces.
    const std::string header = R"({"a_second":{"dtype":"I64","shape":[],"data_offsets":[4,12],"extra":{"x":[1]}},)"
                               R"("b_first":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                               R"("\u00e9\n":{"dtype":"F64","shape":[0,2],"data_offsets":[12,12]}})"
                               "      ";
    const std::string data = std::string("\x00\x00\x20\x41", 4) + std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8);
    const SafetensorsFile f = parse(file_of(header, data));
    REQUIRE(f.tensors.size() == 3);
    CHECK(f.tensors[0].first == "b_first"); // file order = offset order
    CHECK(f.tensors[1].first == "a_second");
    CHECK(f.tensors[2].first == "\xc3\xa9\n");
    CHECK(f.at("b_first").item() == 10.0);
    CHECK(f.at("a_second").dtype() == DType::i64);
    CHECK(f.at("a_second").to_int_vector() == std::vector<std::int64_t>{-2});
    CHECK(f.tensors[2].second.shape() == Dims{0, 2});
    CHECK(f.metadata.empty());
  }
  SUBCASE("empty tensors may share an offset; ties keep header order") {
    const std::string header = "{\"z\":" + entry("F32", "[0]", 0, 0) + ",\"y\":" + entry("F32", "[2]", 0, 8) +
                               ",\"x\":" + entry("BOOL", "[3,0]", 8, 8) + ",\"w\":" + entry("I64", "[0]", 8, 8) + "}";
    const SafetensorsFile f = parse(file_of(header, std::string(8, '\0')));
    REQUIRE(f.tensors.size() == 4);
    CHECK(f.tensors[0].first == "z");
    CHECK(f.tensors[1].first == "y");
    CHECK(f.tensors[2].first == "x");
    CHECK(f.tensors[3].first == "w");
  }
  SUBCASE("BOOL bytes other than 0/1 read as true, stored as 1") {
    const std::string data("\x00\x02\xff", 3);
    const SafetensorsFile f = parse(file_of("{\"m\":" + entry("BOOL", "[3]", 0, 3) + "}", data));
    CHECK(bytes_of(f.at("m")) == std::string("\x00\x01\x01", 3));
  }
  SUBCASE("the PyTorch golden fixtures, if present, load and index their whole file") {
    const fs::path dir = fs::path(HEADGRAD_SOURCE_DIR) / "tests/reference/fixtures";
    if (!fs::exists(dir)) return;
    int files = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".safetensors") continue;
      INFO(e.path().string());
      const SafetensorsFile f = load_safetensors(e.path().string());
      std::uint64_t data = 0;
      for (const auto& [name, t] : f.tensors) data += static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype());
      const std::string bytes = read_file(e.path().string());
      std::uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
      CHECK(8 + n + data == bytes.size());
      CHECK(!f.tensors.empty());
      ++files;
    }
    MESSAGE(files, " fixture files loaded");
  }
}

TEST_CASE("safetensors: refuses a truncated or mislabelled length prefix") {
  CHECK_REFUSED(std::string(), "file is 0 bytes, too short for the 8-byte header length");
  CHECK_REFUSED(std::string("\x02\0\0\0\0", 5), "file is 5 bytes, too short for the 8-byte header length");
  CHECK(contains(error_of<std::invalid_argument>([] { (void)parse_safetensors(nullptr, 0, "null"); }),
                 "null: file is 0 bytes"));
  // 2^63: refused from the prefix alone, before anything is allocated.
  CHECK_REFUSED(le64(std::uint64_t{1} << 63) + "{}  ",
                "header length 9223372036854775808 is larger than the rest of the file (4 bytes)");
  CHECK_REFUSED(le64(~std::uint64_t{0}) + "{}",
                "header length 18446744073709551615 is larger than the rest of the file (2 bytes)");
  CHECK_REFUSED(le64(3) + "{}", "header length 3 is larger than the rest of the file (2 bytes)");
  CHECK_REFUSED(le64(0), "header is empty");
}

TEST_CASE("safetensors: refuses a header over the 16 MiB limit before reading it") {
  // A sparse file: 16 MiB + 1 of header length, no disk space used, nothing read or allocated.
  const test_support::TempDir dir("test_safetensors");
  const std::string path = dir / "huge.safetensors";
  write_file(path, le64(kMaxSafetensorsHeaderBytes + 1) + "{");
  fs::resize_file(path, 8 + kMaxSafetensorsHeaderBytes + 1);
  const std::string msg = error_of<std::invalid_argument>([&] { (void)load_safetensors(path); });
  INFO(msg);
  CHECK(msg == path + ": header length 16777217 exceeds the limit of 16777216 bytes");
}

TEST_CASE("safetensors: refuses a header that is not a JSON object") {
  CHECK_REFUSED(file_of("{\"a\":"), "header is not valid JSON: parse error");
  CHECK_REFUSED(file_of("{\"a\" 1}"), "header is not valid JSON");
  CHECK_REFUSED(file_of("{} x"), "header is not valid JSON"); // garbage after the object
  // NUL padding is not the spec's; nlohmann alone would stop at the NUL and accept the rest.
  CHECK_REFUSED(file_of(std::string("{}\0\0", 4)), "header is not valid JSON: NUL byte at offset 2");
  CHECK_REFUSED(file_of(std::string("{}\0hidden payload", 17)), "header is not valid JSON: NUL byte at offset 2");
  CHECK_REFUSED(file_of("{\"\xff\":1}"), "header is not valid JSON"); // not UTF-8
  CHECK_REFUSED(file_of("{\"a\":NaN}"), "header is not valid JSON");
  CHECK_REFUSED(file_of("[1,2]"), "header must be a JSON object, got array");
  CHECK_REFUSED(file_of("\"{}\""), "header must be a JSON object, got string");
  CHECK_REFUSED(file_of("42"), "header must be a JSON object, got number");
  CHECK_REFUSED(file_of(" {}"), "header must begin with '{' (found leading whitespace)");
  // Trailing spaces are the spec's padding.
  CHECK(parse(file_of("{}        ")).tensors.empty());
  // The error text echoes no raw bytes from the file.
  const std::string msg = error_of<std::invalid_argument>([] { (void)parse(file_of("{\"\x01\xfe")); });
  CHECK(std::all_of(msg.begin(), msg.end(), [](char c) { return c >= 0x20 && c <= 0x7e; }));
  // Nesting and width beyond anything the format needs are refused while parsing.
  CHECK_REFUSED(file_of(R"({"a":{"x":[[[1]]]}})"), "header nests objects or arrays deeper than the format allows");
  const std::string wide = "1" + test_support::repeated(",1", 64);
  CHECK_REFUSED(file_of("{\"a\":{\"shape\":[" + wide + "]}}"),
                "header has an array with more than 64 elements");
}

TEST_CASE("safetensors: refuses malformed tensor entries") {
  const std::string ok = entry("F32", "[2]", 0, 8);
  const std::string data(8, '\0');
  auto one = [&](const std::string& e) { return file_of("{\"t\":" + e + "}", data); };

  CHECK_REFUSED(one("1"), "tensor \"t\": entry must be an object, got number");
  CHECK_REFUSED(one("[0,8]"), "tensor \"t\": entry must be an object, got array");
  CHECK_REFUSED(one(R"({"shape":[2],"data_offsets":[0,8]})"), "tensor \"t\": missing \"dtype\"");
  CHECK_REFUSED(one(R"({"dtype":"F32","data_offsets":[0,8]})"), "tensor \"t\": missing \"shape\"");
  CHECK_REFUSED(one(R"({"dtype":"F32","shape":[2]})"), "tensor \"t\": missing \"data_offsets\"");
  CHECK_REFUSED(one(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"),
                "tensor \"t\": \"dtype\" must be a string, got number 4");
  CHECK_REFUSED(one(R"({"dtype":null,"shape":[2],"data_offsets":[0,8]})"), "\"dtype\" must be a string, got null");

  SUBCASE("dtypes and shapes") {
    // An entry of this dtype and shape over data_offsets [0, 8], and what its refusal says.
    struct Refused {
      const char* dtype;
      const char* shape;
      const char* message;
    };
    for (const Refused& r : {
             Refused{"F33", "[2]", "tensor \"t\": unknown dtype \"F33\""},
             {"f32", "[2]", "tensor \"t\": unknown dtype \"f32\""},
             {"float32", "[2]", "unknown dtype \"float32\""},
             {"F16", "[4]", "tensor \"t\": dtype \"F16\" is not supported (headgrad reads F32, F64, I64 and BOOL)"},
             {"BF16", "[4]", "dtype \"BF16\" is not supported"},
             {"I32", "[2]", "dtype \"I32\" is not supported"},
             {"F32", "\"2\"", "tensor \"t\": \"shape\" must be an array, got string \"2\""},
             {"F32", "{}", "\"shape\" must be an array, got object"},
             {"F32", "[-2]", "tensor \"t\": shape entry 0 must be a non-negative integer, got -2"},
             {"F32", "[1,-1]", "shape entry 1 must be a non-negative integer, got -1"},
             {"F32", "[1.5]", "shape entry 0 must be a non-negative integer, got 1.5"},
             {"F32", "[2.0]", "shape entry 0 must be a non-negative integer, got 2.0"},
             {"F32", "[2e0]", "shape entry 0 must be a non-negative integer"},
             {"F32", "[\"2\"]", "shape entry 0 must be a non-negative integer, got \"2\""},
             {"F32", "[true]", "shape entry 0 must be a non-negative integer, got true"},
             {"F32", "[[2]]", "shape entry 0 must be a non-negative integer, got [2]"},
             {"F32", "[18446744073709551616]", "shape entry 0 must be a non-negative integer"},
             {"F32", "[1,1,1,1,1,1,1,1,2]", "tensor \"t\": shape has 9 dimensions; headgrad supports at most 8"},
             {"F32", "[18446744073709551615]", "is too large (its element count overflows 64 bits)"},
             {"F32", "[4611686018427387904,4]", "tensor \"t\": shape [4611686018427387904,4] is too large"},
             // Zero elements, but Dims would overflow computing it: refused as well.
             {"F32", "[4611686018427387904,4,0]", "is too large"},
             // numel fits, bytes do not: 2^62 float64 elements = 2^65 bytes.
             {"F64", "[4611686018427387904]",
              "shape [4611686018427387904] of F64 needs more than 2^64 bytes, but data_offsets [0, 8] span 8"},
         }) {
      CAPTURE(r.dtype);
      CAPTURE(r.shape);
      CHECK_REFUSED(one(entry(r.dtype, r.shape, 0, 8)), r.message);
    }
  }
  SUBCASE("data_offsets") {
    CHECK_REFUSED(one(R"({"dtype":"F32","shape":[2],"data_offsets":"0-8"})"),
                  "tensor \"t\": \"data_offsets\" must be an array of two integers, got \"0-8\"");
    CHECK_REFUSED(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8]})"),
                  "must be an array of two integers, got [8]");
    CHECK_REFUSED(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4,8]})"), "must be an array of two integers");
    CHECK_REFUSED(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-1,8]})"),
                  "tensor \"t\": \"data_offsets\" must be non-negative integers, got [-1,8]");
    CHECK_REFUSED(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})"), "must be non-negative integers");
    CHECK_REFUSED(one(entry("F32", "[0]", 8, 4)), "tensor \"t\": data_offsets [8, 4] end before they begin");
    CHECK_REFUSED(one(entry("F32", "[25]", 0, 100)),
                  "tensor \"t\": data_offsets [0, 100] run past the end of the data buffer (8 bytes)");
    CHECK_REFUSED(one(entry("F32", "[2]", 18446744073709551608ull, 18446744073709551615ull)),
                  "run past the end of the data buffer");
    CHECK_REFUSED(one(entry("F32", "[3]", 0, 8)),
                  "tensor \"t\": shape [3] of F32 needs 12 bytes, but data_offsets [0, 8] span 8");
    CHECK_REFUSED(one(entry("F64", "[2]", 0, 8)), "shape [2] of F64 needs 16 bytes, but data_offsets [0, 8] span 8");
    CHECK_REFUSED(one(entry("I64", "[]", 0, 0)), "shape [] of I64 needs 8 bytes, but data_offsets [0, 0] span 0");
    CHECK(parse(one(ok)).tensors.size() == 1); // the control: the same file with a good entry
  }
}

TEST_CASE("safetensors: refuses overlaps, holes and trailing bytes") {
  auto two = [](const std::string& a, const std::string& b, std::size_t data) {
    return file_of("{\"a\":" + a + ",\"b\":" + b + "}", std::string(data, '\0'));
  };
  CHECK_REFUSED(two(entry("F32", "[2]", 0, 8), entry("F32", "[2]", 4, 12), 12),
                "tensors \"a\" (data_offsets [0, 8]) and \"b\" (data_offsets [4, 12]) overlap");
  CHECK_REFUSED(two(entry("F32", "[2]", 0, 8), entry("F32", "[2]", 0, 8), 8), "overlap"); // aliasing
  CHECK_REFUSED(two(entry("F32", "[2]", 0, 8), entry("F32", "[0]", 4, 4), 8), "overlap");  // empty, inside
  CHECK_REFUSED(two(entry("F32", "[1]", 0, 4), entry("F32", "[1]", 8, 12), 12),
                "bytes [4, 8) of the data buffer belong to no tensor (the format forbids holes)");
  CHECK_REFUSED(two(entry("F32", "[1]", 4, 8), entry("F32", "[1]", 8, 12), 12), "bytes [0, 4) of the data buffer");
  CHECK_REFUSED(two(entry("F32", "[1]", 0, 4), entry("F32", "[1]", 4, 8), 12),
                "4 trailing bytes after the last tensor's data (bytes [8, 12) of the data buffer belong to no tensor)");
  CHECK_REFUSED(file_of("{}", "abc"), "3 trailing bytes after the last tensor's data");
  CHECK(parse(two(entry("F32", "[1]", 4, 8), entry("F32", "[1]", 0, 4), 8)).tensors[0].first == "b"); // control
}

TEST_CASE("safetensors: refuses duplicate keys and malformed metadata") {
  const std::string e = entry("F32", "[1]", 0, 4);
  const std::string data(4, '\0');
  CHECK_REFUSED(file_of("{\"a\":" + e + ",\"a\":" + e + "}", data), "duplicate tensor name \"a\" in the header");
  CHECK_REFUSED(file_of(R"({"a":{"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", data),
                "duplicate key \"dtype\" in tensor \"a\"");
  CHECK_REFUSED(file_of(R"({"__metadata__":{"k":"1","k":"2"}})"), "duplicate key \"k\" in \"__metadata__\"");
  CHECK_REFUSED(file_of(R"({"__metadata__":{},"__metadata__":{}})"), "duplicate \"__metadata__\" in the header");
  CHECK_REFUSED(file_of(R"({"__metadata__":["a"]})"), "\"__metadata__\" must be an object of strings, got array");
  CHECK_REFUSED(file_of(R"({"__metadata__":"x"})"), "\"__metadata__\" must be an object of strings, got string");
  CHECK_REFUSED(file_of(R"({"__metadata__":{"k":1}})"),
                "\"__metadata__\" value for \"k\" must be a string, got number 1");
  CHECK_REFUSED(file_of(R"({"__metadata__":{"k":null}})"), "value for \"k\" must be a string, got null");
  CHECK_REFUSED(file_of(R"({"__metadata__":{"k":{"x":"y"}}})"), "value for \"k\" must be a string, got object");
  // Names in messages are JSON-quoted and cut short: no control characters, no megabyte messages.
  const std::string long_name(100000, 'x');
  const std::string msg = error_of<std::invalid_argument>(
      [&] { (void)parse(file_of("{\"" + long_name + "\\n\":" + entry("F16", "[2]", 0, 4) + "}", data)); });
  CHECK(msg.size() < 300);
  CHECK(contains(msg, "is not supported"));
}

TEST_CASE("safetensors: corrupted files are refused, never misread") {
  // Every truncation and many random byte flips of a valid file: each parse either succeeds or
  // throws std::invalid_argument (run under -DHEADGRAD_SANITIZE=ON to prove no out-of-bounds read).
  const std::string good = encode_safetensors(sample_tensors(), {{"k", "v"}});
  for (std::size_t len = 0; len < good.size(); ++len) {
    INFO("truncated to ", len);
    const std::string cut = good.substr(0, len);
    CHECK(contains(error_of<std::invalid_argument>([&] { (void)parse(cut); }), "bad.st: "));
  }
  std::mt19937 rng(1234);
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    const std::size_t header_end = 8 + 1000 < bad.size() ? 8 + 1000 : bad.size();
    const std::size_t at = std::uniform_int_distribution<std::size_t>(0, header_end - 1)(rng);
    bad[at] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    try {
      (void)parse(bad);
    } catch (const std::invalid_argument&) {
      ++refused;
    }
  }
  CHECK(refused > 1000); // most flips break something; the rest are harmless (a digit in a value)
}

TEST_CASE("safetensors: a header of 25k tensors parses in linear time") {
  // nlohmann's DOM-with-callback parser rescans the parent object after each nested object:
  // measured on this header shape, 25k entries took 70 s that way (0.2 s with the plain DOM
  // parser). The SAX reader here takes ~0.3 s in a release build, a few seconds under ASan.
  const int n = 25000;
  NamedTensors many;
  many.reserve(n);
  const Tensor empty = Tensor::zeros({0}, DType::f32), one = Tensor::ones({1}, DType::f32);
  for (int i = 0; i < n; ++i) many.emplace_back(fmt::format("layer.{}.weight", i), i % 2 ? empty : one);
  // CPU time, not wall time: the machine may be shared with other builds.
  const std::clock_t t0 = std::clock();
  const std::string bytes = encode_safetensors(many);
  const SafetensorsFile f = parse(bytes);
  const double seconds = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  MESSAGE("encode + parse of ", n, " tensors (", bytes.size(), " bytes): ", seconds, " s of CPU");
  REQUIRE(f.tensors.size() == static_cast<std::size_t>(n));
  CHECK(f.tensors[0].first == "layer.0.weight");
  CHECK(f.tensors[n - 1].first == fmt::format("layer.{}.weight", n - 1));
  CHECK(seconds < 60.0); // the quadratic parser would take ~70 s in release, far more under ASan
}

TEST_CASE("safetensors: load errors name the path") {
  const test_support::TempDir dir("test_safetensors");
  const std::string missing = dir / "missing.safetensors";
  const std::string m1 = error_of<std::runtime_error>([&] { (void)load_safetensors(missing); });
  CHECK(m1 == missing + ": cannot open for reading: No such file or directory");
  const std::string m2 = error_of<std::runtime_error>([&] { (void)load_safetensors(dir.path.string()); });
  CHECK(m2 == dir.path.string() + ": is a directory, not a safetensors file");
  // A malformed file on disk: the same checks as in memory, named by its path.
  const std::string bad = dir / "bad.safetensors";
  write_file(bad, file_of("{\"t\":" + entry("F32", "[3]", 0, 8) + "}", std::string(8, '\0')));
  const std::string m3 = error_of<std::invalid_argument>([&] { (void)load_safetensors(bad); });
  CHECK(m3 == bad + ": tensor \"t\": shape [3] of F32 needs 12 bytes, but data_offsets [0, 8] span 8");
  write_file(bad, "abc");
  CHECK(error_of<std::invalid_argument>([&] { (void)load_safetensors(bad); }) ==
        bad + ": file is 3 bytes, too short for the 8-byte header length");
}

TEST_CASE("safetensors: writer input errors") {
  const Tensor t = Tensor::ones({2});
  CHECK(error_of<std::invalid_argument>([&] { (void)encode_safetensors({{"a", t}, {"a", t}}); }) ==
        "encode_safetensors: duplicate tensor name \"a\"");
  CHECK(error_of<std::invalid_argument>([&] { (void)encode_safetensors({{"__metadata__", t}}); }) ==
        "encode_safetensors: the tensor name \"__metadata__\" is reserved for the metadata");
  CHECK(error_of<std::invalid_argument>([&] { (void)encode_safetensors({{"u", Tensor()}}); }) ==
        "encode_safetensors: tensor \"u\" is undefined");
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)encode_safetensors({{"bad\xff", t}}); }),
                 "is not valid UTF-8"));
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)encode_safetensors({}, {{"k", "\xc3"}}); }),
                 "is not valid UTF-8"));
  // save: refused before any file is touched.
  const test_support::TempDir dir("test_safetensors");
  const std::string path = dir / "x.safetensors";
  CHECK(error_of<std::invalid_argument>([&] { save_safetensors(path, {{"a", t}, {"a", t}}); }) ==
        path + ": duplicate tensor name \"a\"");
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("safetensors: save is atomic - a failed save leaves the old file and no temporary") {
  const test_support::TempDir dir("test_safetensors");
  const std::string path = dir / "ckpt.safetensors";
  const NamedTensors v1 = {{"w", Tensor::from({1, 2, 3}, {3}, DType::f32)}};
  const NamedTensors v2 = {{"w", Tensor::from({4, 5, 6, 7}, {4}, DType::f64)}, {"step", Tensor::from_ints({2}, {1})}};
  save_safetensors(path, v1, {{"v", "1"}});
  const std::string old_bytes = read_file(path);

  SUBCASE("saving over an existing file replaces it") {
    save_safetensors(path, v2, {{"v", "2"}});
    CHECK(read_file(path) == encode_safetensors(v2, {{"v", "2"}}));
    CHECK(load_safetensors(path).metadata.at("v") == "2");
    CHECK(dir.temp_files().empty());
  }
  SUBCASE("a directory that does not exist") {
    const std::string p = dir / "no/such/dir/ckpt.safetensors";
    const std::string msg = error_of<std::runtime_error>([&] { save_safetensors(p, v2); });
    CHECK(contains(msg, p + ": cannot create temporary file '" + p + ".tmp."));
    CHECK(contains(msg, "': No such file or directory"));
    CHECK(read_file(path) == old_bytes);
    CHECK(dir.temp_files().empty());
  }
  SUBCASE("a path that is a directory: the rename fails, the temporary is removed") {
    const std::string d = dir / "adir";
    fs::create_directory(d);
    const std::string msg = error_of<std::runtime_error>([&] { save_safetensors(d, v2); });
    CHECK(contains(msg, d + ": cannot rename temporary file '" + d + ".tmp."));
    CHECK(contains(msg, "Is a directory"));
    CHECK(fs::is_directory(d));
    CHECK(fs::is_empty(d));
    CHECK(dir.temp_files().empty());
  }
  SUBCASE("a write that fails halfway (file-size limit) leaves the old file") {
    // RLIMIT_FSIZE makes write() fail with EFBIG past 64 bytes (SIGXFSZ ignored): a real
    // mid-file I/O error, like a full disk. The limit is restored right after the call.
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit saved{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    rlimit small = saved;
    small.rlim_cur = 64;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    const NamedTensors big = {{"w", Tensor::zeros({1000}, DType::f64)}};
    const std::string msg = error_of<std::runtime_error>([&] { save_safetensors(path, big); });
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    CHECK(contains(msg, path + ": cannot write temporary file '" + path + ".tmp."));
    CHECK(contains(msg, "File too large"));
    CHECK(read_file(path) == old_bytes);
    CHECK(load_safetensors(path).at("w").to_vector() == std::vector<double>{1, 2, 3});
    CHECK(dir.temp_files().empty());
  }
  SUBCASE("a read-only directory (skipped as root, which ignores permissions)") {
    if (::geteuid() == 0) return;
    fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string msg = error_of<std::runtime_error>([&] { save_safetensors(path, v2); });
    fs::permissions(dir.path, fs::perms::owner_all);
    CHECK(contains(msg, "Permission denied"));
    CHECK(read_file(path) == old_bytes);
    CHECK(dir.temp_files().empty());
  }
  SUBCASE("a bare file name saves into the current directory") {
    const fs::path cwd = fs::current_path();
    fs::current_path(dir.path);
    save_safetensors("bare.safetensors", v2);
    fs::current_path(cwd);
    CHECK(load_safetensors(dir / "bare.safetensors").tensors.size() == 2);
    CHECK(dir.temp_files().empty());
  }
}

TEST_CASE("crc32c: RFC 3720's check value, any split of the bytes, every flipped bit seen") {
  const std::string check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xE3069283u);
  CHECK(crc32c(nullptr, 0) == 0u);
  std::string bytes(1000, '\0');
  std::mt19937 rng(3);
  for (auto& b : bytes) b = static_cast<char>(rng());
  const std::uint32_t whole = crc32c(bytes.data(), bytes.size());
  for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{333}, bytes.size()})
    CHECK(crc32c(bytes.data() + k, bytes.size() - k, crc32c(bytes.data(), k)) == whole);
  for (std::size_t bit = 0; bit < 8 * 64; ++bit) { // the first 64 bytes, every bit
    std::string flipped = bytes;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    CHECK(crc32c(flipped.data(), flipped.size()) != whole);
  }
}

TEST_CASE("safetensors checksums: written on request, checked on load, a flipped bit refused by the tensor's name") {
  const test_support::TempDir dir("test_safetensors");
  const NamedTensors ts = {{"w", Tensor::from({1, 2, 3, 4, 5, 6}, {2, 3})},
                           {"b", Tensor::from({0.5, -0.5}, {2}, DType::f64)},
                           {"steps", Tensor::from_ints({7}, {})},
                           {"empty", Tensor::zeros({0, 3})}};
  const std::map<std::string, std::string> meta = {{"format", "x"}};
  const std::string bytes = encode_safetensors(ts, meta, {.checksums = true});
  // the entries are in the header, one per tensor, 8 hex digits; readers do not see them
  CHECK(contains(bytes, "\"crc32c.w\":\""));
  CHECK(contains(bytes, "\"crc32c.empty\":\"00000000\""));
  const SafetensorsFile f = parse_safetensors(bytes.data(), bytes.size(), "c.st");
  CHECK(f.metadata == meta);
  CHECK(f.tensors.size() == 4);
  // without the option: no entries, and the file is what it always was
  CHECK_FALSE(contains(encode_safetensors(ts, meta), "crc32c"));

  // every bit of the data buffer, flipped, is refused naming its tensor, in memory and on disk
  const std::size_t data_start = bytes.size() - (6 * 4 + 2 * 8 + 8);
  const std::string path = dir / "c.safetensors";
  for (std::size_t at = data_start; at < bytes.size(); ++at) {
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x04);
    const std::string name = at < data_start + 24 ? "w" : at < data_start + 40 ? "b" : "steps";
    CAPTURE(at);
    const std::string m = error_of<std::invalid_argument>([&] { (void)parse_safetensors(bad.data(), bad.size(), "c.st"); });
    CHECK(contains(m, fmt::format("c.st: tensor \"{}\" fails its checksum", name)));
    CHECK(contains(m, "the file is corrupt"));
    if (at == data_start || at + 1 == bytes.size()) {
      write_file(path, bad);
      CHECK(contains(error_of<std::invalid_argument>([&] { (void)load_safetensors(path); }),
                     fmt::format("{}: tensor \"{}\" fails its checksum", path, name)));
    }
  }
  // save_safetensors writes the same entries
  save_safetensors(path, ts, meta, {.checksums = true});
  CHECK(read_file(path) == bytes);
  CHECK(load_safetensors(path).metadata == meta);
}

TEST_CASE("safetensors checksums: malformed entries and reserved keys are refused, files without them load") {
  const NamedTensors ts = {{"w", Tensor::from({1, 2}, {2})}};
  // a file without checksums (every older file, PyTorch's) loads as before
  const std::string plain = encode_safetensors(ts, {{"k", "v"}});
  CHECK(parse(plain).metadata == std::map<std::string, std::string>{{"k", "v"}});
  const std::string data = plain.substr(plain.size() - 8);
  auto header_with = [&](const std::string& entry) {
    return file_of("{\"__metadata__\":{" + entry + "},\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                   data);
  };
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)parse(header_with("\"crc32c.w\":\"12345\"")); }),
                 "checksum entry \"crc32c.w\" must be 8 lowercase hex digits"));
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)parse(header_with("\"crc32c.w\":\"ABCDEF01\"")); }),
                 "must be 8 lowercase hex digits"));
  CHECK(contains(error_of<std::invalid_argument>([&] { (void)parse(header_with("\"crc32c.v\":\"00000000\"")); }),
                 "checksum entry \"crc32c.v\" names no tensor of the file"));
  // the caller cannot write them by hand
  for (bool on : {false, true})
    CHECK(contains(error_of<std::invalid_argument>(
                       [&] { (void)encode_safetensors(ts, {{"crc32c.w", "00000000"}}, {.checksums = on}); }),
                   "keys beginning with \"crc32c.\" are reserved"));
}

TEST_CASE("load_safetensors refuses a FIFO at once instead of waiting for a writer") {
  const test_support::TempDir dir("test_safetensors");
  const std::string fifo = dir / "pipe.safetensors";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  alarm(20); // an open() that waits for a writer ends the test (SIGALRM) instead of hanging it
  const std::string m = error_of<std::runtime_error>([&] { (void)load_safetensors(fifo); });
  alarm(0);
  CHECK(m == fifo + ": is a FIFO (named pipe), not a regular file (a safetensors file must be one)");
}
