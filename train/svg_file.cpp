#include "train/svg_file.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <stdexcept>

namespace headgrad::train {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

void write_svg_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f) throw std::runtime_error(fmt::format("{}: cannot write", path));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot write ({})", path, ec.message()));
}

} // namespace headgrad::train
