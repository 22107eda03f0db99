// safetensors.hpp - reading and writing the safetensors format (checkpoints, PyTorch fixtures).
//
// Format (https://github.com/huggingface/safetensors):
//   8 bytes   N, little-endian u64: the length of the header
//   N bytes   UTF-8 JSON object, beginning with '{', possibly padded at the end with spaces:
//               {"__metadata__": {"key": "value", ...},          <- optional, strings only
//                "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//   the rest  the data buffer: each tensor's elements, row-major, little-endian, at
//             [begin, end) counted from the first byte after the header
//
// Reading guarantees (a checkpoint or fixture may be truncated, corrupt or hostile):
// - Every malformed input throws std::invalid_argument with one message "<file>: <problem>";
//   nothing is read out of bounds. The header length is checked against the file size before
//   the header is read (2^63 is refused before anything is allocated; so is anything over 16 MiB,
//   kMaxSafetensorsHeaderBytes, and a header is refused at its first entry past
//   kMaxSafetensorsEntries), and the whole header is checked against the data size
//   before any tensor is allocated: tensor memory is bounded by the file size, and parsing time
//   and memory are linear in the header size.
// - As the spec requires, the tensors must index the whole data buffer: no overlaps, no holes, no
//   trailing bytes. Duplicate names (duplicate JSON keys anywhere) are refused.
// - Readable dtypes: F32, F64, I64, BOOL (the framework's four). Other spec dtypes (F16, BF16,
//   I32, ...) get their own "not supported" message, distinct from an unknown dtype.
// - BOOL bytes other than 0 are read as true and stored as 1 (DType::bool8 is read through
//   `bool`, for which any other byte value is undefined behaviour).
// - I/O failures (missing file, a directory, a read error) throw std::runtime_error naming the path
//   and the errno text. Only a regular file is opened (a FIFO, /dev/zero or a socket is refused
//   before anything is read: framework/io/regular_file.hpp).
// - Checksums (headgrad's addition; other readers ignore them as any metadata): a metadata entry
//   "crc32c.<name>" = 8 lowercase hex digits is the CRC-32C (framework/io/crc32c.hpp) of tensor
//   <name>'s bytes as the file stores them. Each tensor that has one is checked once its bytes are
//   read, and a mismatch is refused naming the tensor ("... fails its checksum ... the file is
//   corrupt"); a checksum entry for a tensor the file does not hold, or one that is not 8 hex
//   digits, is refused too. Files without checksums (older headgrad files, PyTorch's) load as
//   before. The entries are consumed by the reader: SafetensorsFile::metadata does not show them.
//
// Writing guarantees:
// - With SaveOptions::checksums, every tensor gets its "crc32c.<name>" metadata entry (computed
//   from the bytes written). Metadata keys beginning with "crc32c." are reserved for them: given
//   by the caller they are refused, with or without the option.
// - Tensors are stored in the given order, back to back; any layout (views, transposes) is
//   written in logical row-major order. The header is compact JSON ("__metadata__" first if
//   any, then tensors in order, keys dtype/shape/data_offsets) padded with spaces to a multiple of
//   8 bytes so the data buffer starts 8-byte aligned, as the reference writer does.
// - save_safetensors is atomic: it writes "<path>.tmp.<pid>.<n>" in the same directory, fsyncs
//   it, renames it over `path` and fsyncs the directory. After a failure `path` still holds its
//   old content (or still does not exist) and the temporary file has been removed. (If `path` is
//   a symlink, the link itself is replaced by the new file, as rename() does.)
// - A process killed mid-save (SIGKILL, OOM killer) cannot remove its temporary file, so each
//   save first removes the temporary files of `path` left by writers that no longer exist (see
//   remove_stale_temp_files): crashed runs do not pile up multi-MB leftovers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad::io {

// The largest header accepted, and the most entries (tensors and metadata keys together) it may
// hold. Parsing costs memory per entry (its name, its checked fields): a header of 1.5 million
// empty tensors in 90 MB cost 1.0 GB to refuse, 29 MB of metadata keys 724 MB. Both bounds are
// checked before the entries are stored - the size before the header is read, the count as each
// entry is met - so a refused header costs about its own size. They are far above what a model
// needs (a checkpoint holds two entries per parameter tensor, itself and its checksum, and a few
// dozen more) and below the reference implementation's 100 MB (MAX_HEADER_SIZE), which a header
// of tiny entries turns into gigabytes.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kMaxSafetensorsEntries = std::uint64_t{1} << 16;

using headgrad::NamedTensors; // framework/core/tensor.hpp

// A loaded file. Every tensor is a fresh contiguous tensor with no history.
struct SafetensorsFile {
  NamedTensors tensors;                                // in file order (sorted by data offset)
  std::map<std::string, std::string> metadata;         // "__metadata__" (empty if absent)
  std::string source;                                  // the file name used in error messages

  const Tensor* find(const std::string& name) const;   // nullptr if absent
  // Like find(), but a missing tensor throws std::invalid_argument "<source>: no tensor named ...".
  const Tensor& at(const std::string& name) const;
};

// How a file is written.
struct SaveOptions {
  bool checksums = false; // a CRC-32C of each tensor in the metadata, checked when the file is read
};

// The prefix of the checksum metadata keys ("crc32c.<tensor name>").
inline constexpr const char* kChecksumKeyPrefix = "crc32c.";

// The complete file bytes. Throws std::invalid_argument for an undefined tensor, a dtype the
// format cannot hold, a duplicate name, the reserved name "__metadata__", or names/metadata that
// are not valid UTF-8.
std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata = {},
                               const SaveOptions& options = {});

// Writes the same bytes as encode_safetensors atomically (see above), streaming each tensor
// instead of building the whole file in memory. Bad input: std::invalid_argument, before any
// file is touched. I/O failure: std::runtime_error "<path>: <what failed>: <errno text>".
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {}, const SaveOptions& options = {});

// Parses a complete file held in memory; `name_for_errors` is the "<file>" of error messages.
SafetensorsFile parse_safetensors(const void* data, std::size_t size, const std::string& name_for_errors);

// Reads and parses the file at `path`. The header is validated before any tensor is allocated,
// then each tensor is read straight into its own storage (no second copy of the file).
SafetensorsFile load_safetensors(const std::string& path);

// Removes the files "<path>.tmp.<pid>.<n>" (save_safetensors' temporaries for `path`, names of
// exactly that shape) whose writer process <pid> no longer exists on this machine. Another live
// process's (or this process's) temporaries are left alone. Best effort: errors are ignored.
// Returns how many files were removed. save_safetensors calls it before it writes.
std::size_t remove_stale_temp_files(const std::string& path);

} // namespace headgrad::io
