// safetensors.cpp - the data buffer (tensor bytes in file order) and the in-memory entry points:
// encode_safetensors, parse_safetensors, SafetensorsFile. The header lives in
// safetensors_header.cpp, the file I/O (load, atomic save) in safetensors_file.cpp.
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fmt/format.h>

#include "framework/io/crc32c.hpp"
#include "framework/io/safetensors_format.hpp"
#include "framework/core/strided.hpp"

namespace headgrad::io {
namespace detail {
namespace {

constexpr bool kLittleEndianHost = std::endian::native == std::endian::little;

// dst (contiguous) = src (strided), element by element as ES raw bytes. Bytes, not values: a
// float's NaN payload survives, and no type-punned pointer is dereferenced (memcpy).
template <std::size_t ES>
void gather_bytes(unsigned char* dst, const unsigned char* src, const Dims& shape, const Dims& strides) {
  book::for_each_row<2>(shape, std::array<Dims, 2>{contiguous_strides(shape), strides},
                           [&](const auto& o, std::int64_t n, const auto& in) {
                             for (std::int64_t i = 0; i < n; ++i)
                               std::memcpy(dst + (o[0] + i) * ES, src + (o[1] + i * in[1]) * static_cast<std::int64_t>(ES),
                                           ES);
                           });
}

// Little-endian file order <-> host order (a no-op on every machine we build for).
void swap_to_from_little(unsigned char* p, std::size_t nbytes, std::size_t es) {
  if constexpr (!kLittleEndianHost)
    for (std::size_t i = 0; i + es <= nbytes; i += es) std::reverse(p + i, p + i + es);
  else
    (void)p, (void)nbytes, (void)es;
}

} // namespace

void tensor_bytes(const Tensor& t, const ByteSink& sink) {
  const std::size_t es = dtype_size(t.dtype());
  const std::size_t nbytes = static_cast<std::size_t>(t.numel()) * es;
  if (nbytes == 0) return;
  // The common case (a contiguous float or int tensor on a little-endian host) is written
  // straight from its storage. Bools always take the copy: their bytes are normalised to 0/1.
  if (t.is_contiguous() && t.dtype() != DType::bool8 && kLittleEndianHost) {
    sink(t.raw(), nbytes);
    return;
  }
  std::vector<unsigned char> buf(nbytes);
  const auto* src = static_cast<const unsigned char*>(t.raw());
  switch (es) {
  case 1: gather_bytes<1>(buf.data(), src, t.shape(), t.strides()); break;
  case 4: gather_bytes<4>(buf.data(), src, t.shape(), t.strides()); break;
  case 8: gather_bytes<8>(buf.data(), src, t.shape(), t.strides()); break;
  default: throw std::logic_error(fmt::format("safetensors: no byte layout for dtype {}", dtype_name(t.dtype())));
  }
  if (t.dtype() == DType::bool8)
    for (auto& b : buf) b = b != 0;
  swap_to_from_little(buf.data(), nbytes, es);
  sink(buf.data(), nbytes);
}

void fix_loaded_bytes(const Tensor& t) {
  const std::size_t es = dtype_size(t.dtype());
  const std::size_t nbytes = static_cast<std::size_t>(t.numel()) * es;
  auto* p = static_cast<unsigned char*>(t.raw());
  // Reading a bool8 element goes through `bool`, for which a byte other than 0 or 1 is undefined
  // behaviour; the framework's convention is nonzero = true.
  if (t.dtype() == DType::bool8)
    for (std::size_t i = 0; i < nbytes; ++i) p[i] = p[i] != 0;
  swap_to_from_little(p, nbytes, es);
}

std::map<std::string, std::uint32_t> take_checksums(Layout& layout, const std::string& where) {
  std::map<std::string, std::uint32_t> out;
  const std::string prefix = kChecksumKeyPrefix;
  for (auto it = layout.metadata.lower_bound(prefix); it != layout.metadata.end() && it->first.rfind(prefix, 0) == 0;) {
    const std::string name = it->first.substr(prefix.size());
    const std::string& v = it->second;
    if (v.size() != 8 || v.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail(where, fmt::format("checksum entry \"{}\" must be 8 lowercase hex digits (a CRC-32C)", it->first));
    const bool present = std::any_of(layout.entries.begin(), layout.entries.end(),
                                     [&](const Entry& e) { return e.name == name; });
    if (!present) fail(where, fmt::format("checksum entry \"{}\" names no tensor of the file", it->first));
    out.emplace(name, static_cast<std::uint32_t>(std::stoul(v, nullptr, 16)));
    it = layout.metadata.erase(it);
  }
  return out;
}

void verify_checksum(const std::map<std::string, std::uint32_t>& checksums, const std::string& name, const void* data,
                     std::size_t n, const std::string& where) {
  const auto it = checksums.find(name);
  if (it == checksums.end()) return;
  const std::uint32_t got = crc32c(data, n);
  if (got != it->second)
    fail(where, fmt::format("tensor \"{}\" fails its checksum (CRC-32C {:08x} stored, {:08x} computed from its {} "
                            "bytes): the file is corrupt",
                            name, it->second, got, n));
}

std::map<std::string, std::string> metadata_to_write(const NamedTensors& tensors,
                                                     const std::map<std::string, std::string>& metadata,
                                                     const SaveOptions& options, const std::string& where) {
  const std::string prefix = kChecksumKeyPrefix;
  for (const auto& [key, value] : metadata)
    if (key.rfind(prefix, 0) == 0)
      fail(where, fmt::format("metadata key \"{}\": keys beginning with \"{}\" are reserved for the tensors' "
                              "checksums (SaveOptions::checksums)",
                              key, prefix));
  if (!options.checksums) return metadata;
  std::map<std::string, std::string> out = metadata;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) continue; // make_header refuses it by name
    std::uint32_t crc = 0;
    tensor_bytes(t, [&](const void* p, std::size_t n) { crc = crc32c(p, n, crc); });
    out[prefix + name] = fmt::format("{:08x}", crc);
  }
  return out;
}

} // namespace detail

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  if (const Tensor* t = find(name)) return *t;
  std::string names;
  for (std::size_t i = 0; i < tensors.size() && i < 20; ++i) names += (i ? ", " : "") + tensors[i].first;
  if (tensors.size() > 20) names += ", ...";
  detail::fail(source, fmt::format("no tensor named '{}' (the file has {} tensors: {})", name, tensors.size(), names));
}

std::string encode_safetensors(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                               const SaveOptions& options) {
  std::uint64_t data_size = 0;
  const std::string header = detail::make_header(
      tensors, detail::metadata_to_write(tensors, metadata, options, "encode_safetensors"), "encode_safetensors",
      data_size);
  std::string out = detail::le64(header.size()) + header;
  out.reserve(out.size() + data_size);
  for (const auto& nt : tensors)
    detail::tensor_bytes(nt.second, [&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); });
  return out;
}

SafetensorsFile parse_safetensors(const void* data, std::size_t size, const std::string& name_for_errors) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (size > 0 && bytes == nullptr) detail::fail(name_for_errors, "null data pointer");
  const std::uint64_t n = detail::check_header_length(bytes, size, name_for_errors);
  const std::string_view header(reinterpret_cast<const char*>(bytes) + 8, n);
  detail::Layout layout = detail::parse_header(header, size - 8 - n, name_for_errors);
  // Every entry now lies inside the buffer and the entries do not overlap, so the tensors
  // together need exactly the data buffer's size.
  const unsigned char* buffer = bytes + 8 + n;
  return detail::read_tensors(layout, name_for_errors, [&](void* dst, const detail::Entry& e) {
    if (e.end > e.begin) std::memcpy(dst, buffer + e.begin, e.end - e.begin);
  });
}

} // namespace headgrad::io
