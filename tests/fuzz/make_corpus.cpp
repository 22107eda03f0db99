// make_corpus.cpp - writes the committed seed corpora of fuzz_safetensors (tests/fuzz/corpus/) and
// fuzz_checkpoint_metadata (tests/fuzz/corpus_metadata/). Valid inputs come from the project's own
// writers (encode_safetensors, run_metadata); the edge cases are written byte by byte. Regenerate with:
//   cmake --build build-fuzz --target fuzz_make_corpus &&
//   ./build-fuzz/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus tests/fuzz/corpus_metadata
// (the output is deterministic, so an unchanged writer gives unchanged files).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "framework/io/safetensors.hpp"
#include "train/run/checkpoint.hpp"

using namespace headgrad;

namespace {

std::string dir;

void put(const std::string& name, const std::string& bytes) {
  std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A hand-written file: the 8-byte length, the header as given, then `data`.
std::string raw(const std::string& header, const std::string& data = "") { return le64(header.size()) + header + data; }

Tensor f32(Dims shape) {
  Tensor t = new_tensor(shape, DType::f32);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = 0.5f * static_cast<float>(i) - 1.0f;
  return t;
}

// fuzz_checkpoint_metadata's input: "key=value" lines.
std::string metadata_lines(const std::map<std::string, std::string>& meta) {
  std::string out;
  for (const auto& [k, v] : meta) out += k + "=" + v + "\n";
  return out;
}

void write_metadata_corpus() {
  train::RunConfig c;
  const auto valid = train::run_metadata(c, 0);
  put("valid_default", metadata_lines(valid));
  c.task = data::Task::reverse;
  c.steps = 50;
  c.lr = 3e-4;
  put("valid_reverse_step_1200", metadata_lines(train::run_metadata(c, 1200)));
  auto with = [&](const std::string& key, const std::string& value) {
    auto m = valid;
    m[key] = value;
    return metadata_lines(m);
  };
  put("edge_empty", "");
  put("edge_format_unknown", with("format", "headgrad-checkpoint-0"));
  put("edge_step_negative", with("step", "-1"));
  put("edge_step_text", with("step", "12abc"));
  put("edge_step_huge", with("step", "99999999999999999999999"));
  auto missing = valid;
  missing.erase("step");
  put("edge_step_missing", metadata_lines(missing));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR [METADATA_OUT_DIR]\n", argv[0]);
    return 2;
  }
  if (argc == 3) {
    dir = argv[2];
    write_metadata_corpus();
  }
  dir = argv[1];

  // ---- valid files, from the writer ---------------------------------------------------------
  put("valid_empty", io::encode_safetensors({}));
  put("valid_f32_2x3", io::encode_safetensors({{"w", f32({2, 3})}}));
  {
    Tensor d = new_tensor({}, DType::f64); // a scalar (shape [])
    d.data<double>()[0] = 3.25;
    Tensor i = new_tensor({3}, DType::i64);
    for (int k = 0; k < 3; ++k) i.data<std::int64_t>()[k] = k - 1;
    Tensor b = new_tensor({2, 2}, DType::bool8);
    for (int k = 0; k < 4; ++k) b.data<bool>()[k] = k % 2 == 0;
    put("valid_all_dtypes", io::encode_safetensors({{"scalar", d}, {"ids", i}, {"mask", b}}));
  }
  put("valid_metadata", io::encode_safetensors({{"encoder.blks.0.attention.W_q.weight", f32({4, 4})},
                                                {"encoder.blks.0.attention.W_q.bias", f32({4})}},
                                               {{"format", "headgrad-checkpoint-1"}, {"step", "7"}}));
  put("valid_zero_size", io::encode_safetensors({{"empty", f32({0, 5})}, {"one", f32({1})}}));
  // with a CRC-32C of each tensor (what checkpoints carry), and the same file with one bit flipped
  const std::string checked = io::encode_safetensors({{"w", f32({2, 2})}, {"empty", f32({0})}}, {{"step", "3"}},
                                                     {.checksums = true});
  put("valid_checksums", checked);
  std::string flipped = checked;
  flipped.back() = static_cast<char>(flipped.back() ^ 0x20);
  put("edge_checksum_mismatch", flipped);
  put("valid_view", io::encode_safetensors({{"t", f32({3, 2}).transpose(0, 1)}})); // written row-major
  put("valid_unicode_name", io::encode_safetensors({{"\xc3\xa9t\xc3\xa9 \xe2\x82\xac", f32({1, 1})}},
                                                   {{"note", "tab\tquote\"backslash\\"}}));

  // ---- edge cases, by hand -----------------------------------------------------------------
  put("edge_8_zero_bytes", le64(0));
  put("edge_short", std::string("\x02\x00\x00", 3));
  put("edge_len_too_big", le64(1000) + "{}");
  put("edge_len_2_63", le64(std::uint64_t{1} << 63) + "{}      ");
  put("edge_padded_header", raw("{}      "));
  put("edge_leading_space", raw(" {}"));
  put("edge_nul_in_header", raw(std::string("{}\0x", 4)));
  put("edge_not_object", raw("[1,2]"));
  put("edge_bad_json", raw("{\"a\":"));
  put("edge_hole", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')));
  put("edge_overlap", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                          std::string(4, '\0')));
  put("edge_trailing", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(6, '\0')));
  put("edge_size_mismatch", raw(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')));
  put("edge_duplicate_name", raw(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                                 R"("a":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})",
                                 std::string(8, '\0')));
  put("edge_duplicate_field", raw(R"({"a":{"dtype":"F32","dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                                  std::string(4, '\0')));
  put("edge_f16", raw(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0')));
  put("edge_unknown_dtype", raw(R"({"h":{"dtype":"Q7","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0')));
  put("edge_shape_overflow", raw(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})"));
  put("edge_shape_negative", raw(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0')));
  put("edge_shape_float", raw(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", std::string(4, '\0')));
  put("edge_shape_9_dims", raw(R"({"a":{"dtype":"BOOL","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})",
                               std::string(1, '\x01')));
  put("edge_offsets_reversed", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",
                                   std::string(4, '\0')));
  put("edge_offsets_huge", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,0]}})",
                               std::string(4, '\0')));
  put("edge_bool_bytes", raw(R"({"m":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})", "\x00\x01\x02\xff"));
  put("edge_metadata_nested", raw(R"({"__metadata__":{"a":{"b":1}}})"));
  put("edge_metadata_number", raw(R"({"__metadata__":{"a":1}})"));
  put("edge_checksum_not_hex", raw(R"({"__metadata__":{"crc32c.a":"xyz"},"a":{"dtype":"F32","shape":[1],)"
                                   R"("data_offsets":[0,4]}})",
                                   std::string(4, '\0')));
  put("edge_checksum_no_tensor", raw(R"({"__metadata__":{"crc32c.b":"00000000"},"a":{"dtype":"F32","shape":[1],)"
                                     R"("data_offsets":[0,4]}})",
                                     std::string(4, '\0')));
  put("edge_extra_field", raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[[[[1]]]]}})",
                              std::string(4, '\0')));
  put("edge_deep_nesting", raw(R"({"a":{"b":{"c":{"d":{"e":[[[[[[1]]]]]]}}}}})"));
  put("edge_escapes", raw(R"({"\u00e9\ud83d\ude00":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                          std::string(4, '\0')));
  put("edge_lone_surrogate", raw(R"({"\ud800":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                                 std::string(4, '\0')));
  put("edge_invalid_utf8", raw("{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
                               std::string(4, '\0')));
  put("edge_reserved_name_entry", raw(R"({"__metadata__":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                                      std::string(4, '\0')));
  return 0;
}
