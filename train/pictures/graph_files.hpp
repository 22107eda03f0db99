// graph_files.hpp - an autograd graph (framework/io/graph_dot.hpp) written as files: Graphviz DOT
// always, and SVG beside it when Graphviz's `dot` program is installed (Debian: graphviz).
#pragma once
#include <string>

#include "framework/io/graph_dot.hpp"

namespace headgrad::train {

// Writes the graph to `path` with its extension replaced by .dot and, when `dot` is on PATH, to
// the same name with .svg (dot -Tsvg). Returns the line to show the user: what was written, or
// the DOT file and a one-line hint how to get the SVG. Throws std::runtime_error naming the path
// if the DOT file cannot be written.
std::string write_graph_files(const std::string& path, const Graph& graph, const std::string& title);

// The program `name` as found on PATH ("" if it is not there).
std::string find_on_path(const std::string& name);

} // namespace headgrad::train
