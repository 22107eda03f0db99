// safetensors_format.hpp - internals shared by the in-memory and the file paths of
// framework/io/safetensors: the header (JSON, in safetensors_header.cpp, the only file that sees
// nlohmann::json) and the byte layout of tensor data (safetensors.cpp). Not part of the API.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "framework/io/safetensors.hpp"

namespace headgrad::io::detail {

// Throws std::invalid_argument("<where>: <problem>"): the one shape of every format error.
[[noreturn]] void fail(const std::string& where, const std::string& problem);

// One tensor of a checked header. [begin, end) is relative to the data buffer.
struct Entry {
  std::string name;
  DType dtype;
  Dims shape;
  std::uint64_t begin, end;
};

// A header that has passed every check against the size of the data buffer that follows it:
// reading entries[i] means reading bytes [begin, end) of that buffer, which exist, are exactly
// numel * dtype_size bytes, and belong to no other entry.
struct Layout {
  std::vector<Entry> entries; // sorted by offset (ties: header order)
  std::map<std::string, std::string> metadata;
};

// Decodes the 8-byte little-endian header length and checks it against the file size (which
// must be at least 8). Returns N, which is then <= file_size - 8 and <= kMaxSafetensorsHeaderBytes.
std::uint64_t check_header_length(const unsigned char* first8, std::uint64_t file_size, const std::string& where);

// Parses and validates the N header bytes; data_size = file size - 8 - N.
Layout parse_header(std::string_view header, std::uint64_t data_size, const std::string& where);

// The space-padded header JSON for these tensors (validating names and tensors; errors name
// `where`), and the total size of their data.
std::string make_header(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                        const std::string& where, std::uint64_t& data_size);

// The checksum entries of a checked header ("crc32c.<name>" = 8 hex digits), validated against
// its entries and removed from layout.metadata: tensor name -> CRC-32C. Throws (fail) for a
// malformed value or a name the file does not hold.
std::map<std::string, std::uint32_t> take_checksums(Layout& layout, const std::string& where);
// Throws (fail) naming the tensor if `checksums` holds one for `name` that the n bytes at `data`
// (the tensor's bytes as the file stores them) do not match.
void verify_checksum(const std::map<std::string, std::uint32_t>& checksums, const std::string& name, const void* data,
                     std::size_t n, const std::string& where);
// `metadata` with the checksum entry of every tensor added (refusing caller keys that begin with
// kChecksumKeyPrefix either way); errors name `where`.
std::map<std::string, std::string> metadata_to_write(const NamedTensors& tensors,
                                                     const std::map<std::string, std::string>& metadata,
                                                     const SaveOptions& options, const std::string& where);

// The 8 bytes of a little-endian u64.
std::string le64(std::uint64_t v);

// Calls sink(bytes, n) one or more times with t's data as the file stores it: logical row-major
// order, little-endian, bools as 0/1. Contiguous float/int tensors are passed without a copy.
using ByteSink = std::function<void(const void*, std::size_t)>;
void tensor_bytes(const Tensor& t, const ByteSink& sink);

// After a tensor's bytes were copied in from a file: host byte order and 0/1 bools.
void fix_loaded_bytes(const Tensor& t);

// The tensors of a checked header, read in file order: read(dst, e) copies entry e's bytes as the
// file stores them into dst (e.end - e.begin bytes); each is then checked against its checksum
// and converted to host order. source: the file's name in errors and in the result.
template <typename Read> SafetensorsFile read_tensors(Layout& layout, const std::string& source, Read&& read) {
  const auto checksums = take_checksums(layout, source);
  SafetensorsFile out;
  out.source = source;
  out.metadata = layout.metadata;
  out.tensors.reserve(layout.entries.size());
  for (const Entry& e : layout.entries) {
    Tensor t = new_tensor(e.shape, e.dtype);
    read(t.raw(), e);
    verify_checksum(checksums, e.name, t.raw(), e.end - e.begin, source); // the file's bytes
    fix_loaded_bytes(t);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

} // namespace headgrad::io::detail
