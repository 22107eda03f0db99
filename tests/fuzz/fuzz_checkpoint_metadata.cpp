// fuzz_checkpoint_metadata.cpp - libFuzzer target for the checkpoint metadata reader,
// train::run_config_from_metadata (./dev.sh fuzz [SECONDS]). A checkpoint's __metadata__ is
// whatever the file says: every key and value comes from outside, so the reader has to refuse
// bad ones with std::invalid_argument (train/run/checkpoint.hpp) and never crash.
//
// Input: lines "key=value" (split at the first '='; a later line with the same key wins), the
// map a safetensors header's __metadata__ gives. Oracles: std::invalid_argument is the one
// expected failure; anything else (a crash, an ASan/UBSan report, another exception, a hang) is a
// finding. A metadata map that is accepted must survive a round trip: run_metadata() of the
// config read back gives a map that reads back to the same config and step.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "train/run/checkpoint.hpp"

using namespace headgrad;

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_checkpoint_metadata: %s\n", what);
  std::abort();
}

std::map<std::string, std::string> parse_lines(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, std::string> meta;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    const std::size_t eq = line.find('=');
    if (eq != std::string::npos) meta[line.substr(0, eq)] = line.substr(eq + 1);
    begin = end + 1;
  }
  return meta;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::map<std::string, std::string> meta = parse_lines(data, size);
  train::RunConfig config;
  std::int64_t step = 0;
  try {
    config = train::run_config_from_metadata(meta, "fuzz", step);
  } catch (const std::invalid_argument&) {
    return 0; // refused: the documented outcome for bad metadata
  }
  // Accepted: write it back and read it again (outside the try: any exception is a finding).
  const std::map<std::string, std::string> written = train::run_metadata(config, step);
  std::int64_t step2 = -1;
  const train::RunConfig again = train::run_config_from_metadata(written, "fuzz round trip", step2);
  if (step2 != step) finding("step differs after a round trip");
  if (train::run_metadata(again, step2) != written) finding("config differs after a round trip");
  return 0;
}
