// svg_file.hpp - what every picture writer in train/ shares: XML escaping of text, and writing a
// file atomically (the heatmaps, the training curves, the graph's DOT file).
#pragma once
#include <string>

namespace headgrad::train {

// Text for an SVG/XML element or attribute: < > & " replaced by their entities.
std::string xml_escape(const std::string& s);

// Writes `text` to `path` through a temporary file renamed into place, so a reader never sees a
// half-written picture. Throws std::runtime_error naming the path if it cannot.
void write_svg_file(const std::string& path, const std::string& text);

} // namespace headgrad::train
