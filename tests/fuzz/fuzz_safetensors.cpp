// fuzz_safetensors.cpp - libFuzzer target for the safetensors reader (./dev.sh fuzz [SECONDS]).
//
// The reader promises (framework/io/safetensors.hpp) that every malformed input throws
// std::invalid_argument and that nothing is read out of bounds. So std::invalid_argument is the
// one expected outcome besides success; anything else is a finding: a crash, an ASan or UBSan
// report (both abort: -fno-sanitize-recover), any other exception (it escapes and libFuzzer
// reports "deadly signal"), a timeout or an out-of-memory.
//
// A second oracle for inputs that do parse: writing the result back with encode_safetensors and
// parsing that must give the same tensors (names, order, dtypes, shapes, bytes) and metadata. A
// file we can read but not write back, or that reads differently after a round trip, is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "framework/io/safetensors.hpp"

using namespace headgrad;

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n", what);
  std::abort();
}

void check_same(const io::SafetensorsFile& a, const io::SafetensorsFile& b) {
  if (a.metadata != b.metadata) finding("metadata differs after a round trip");
  if (a.tensors.size() != b.tensors.size()) finding("tensor count differs after a round trip");
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [na, ta] = a.tensors[i];
    const auto& [nb, tb] = b.tensors[i];
    if (na != nb) finding("tensor name or order differs after a round trip");
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) finding("dtype or shape differs after a round trip");
    if (!ta.is_contiguous() || !tb.is_contiguous()) finding("a loaded tensor is not contiguous");
    const std::size_t nbytes = static_cast<std::size_t>(ta.numel()) * dtype_size(ta.dtype());
    if (nbytes && std::memcmp(ta.raw(), tb.raw(), nbytes) != 0) finding("tensor bytes differ after a round trip");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  io::SafetensorsFile parsed;
  try {
    parsed = io::parse_safetensors(data, size, "fuzz");
  } catch (const std::invalid_argument&) {
    return 0; // a refused file: the documented outcome for malformed input
  }
  // Accepted: round trip. Outside the try, so that any exception here is a finding too.
  const std::string bytes = io::encode_safetensors(parsed.tensors, parsed.metadata);
  check_same(parsed, io::parse_safetensors(bytes.data(), bytes.size(), "fuzz round trip"));
  return 0;
}
