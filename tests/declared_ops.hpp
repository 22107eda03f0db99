// declared_ops.hpp - the ops the public op headers (framework/ops/*.hpp) declare, read from the
// headers themselves: what the completeness tests hold the registrations (framework/checks/registry.hpp)
// against, so that an op declared without its rows fails a test that never names it.
#pragma once
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/test_support.hpp"

namespace test_support {

// framework/ops/'s headers, a new one included, but the ops' helpers, which declare no op; and the
// drawing of tokens (train/sample/sampling.hpp).
inline std::vector<std::string> op_headers() {
  const std::set<std::string> helpers = {"attention_mask.hpp", "reduced_axes.hpp", "dropout_draw.hpp", "map.hpp",
                                         "scatter.hpp"};
  std::set<std::string> headers = {"train/sample/sampling.hpp"};
  for (const auto& e : std::filesystem::directory_iterator(std::string(HEADGRAD_SOURCE_DIR) + "/framework/ops"))
    if (e.path().extension() == ".hpp" && !helpers.count(e.path().filename().string()))
      headers.insert("framework/ops/" + e.path().filename().string());
  return {headers.begin(), headers.end()};
}

// The ops a header declares: a function returning tensors, "Tensor name(" at the start of a line
// (or the pieces of a split, or values with indices).
inline std::set<std::string> ops_declared_in(const std::string& header) {
  const std::string text = read_file(std::string(HEADGRAD_SOURCE_DIR) + "/" + header);
  const std::regex decl(R"(^(?:Tensor|std::vector<Tensor>|ValuesIndices) ([a-z_0-9]+)\()", std::regex::multiline);
  std::set<std::string> declared;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it)
    declared.insert((*it)[1].str());
  return declared;
}

// Every op of every op header.
inline std::set<std::string> declared_ops() {
  std::set<std::string> all;
  for (const auto& header : op_headers()) all.merge(ops_declared_in(header));
  return all;
}

} // namespace test_support
