// derivatives_table.hpp - framework/ops/DERIVATIVES.md's table of derivatives, generated from the
// rows the op families register (framework/checks/registry.hpp, CheckFamily::derivatives). The
// program headgrad_derivatives writes it into the file; tests/test_derivatives.cpp fails while the
// committed file differs from what the registrations generate.
//
// A family's rows are markdown, one row a line: its place in the table (the table is sorted by
// it; the rows are numbered in tens, which leaves room for a new one), then the table's cells,
// op | forward | backward (VJP) | saves | file · function, as the table shows them (a '|' inside
// a cell written "\|"). A line that starts with a space continues the row above it:
//
//   170 | sigmoid | `y = 1 / (1 + e⁻ˣ)` | `dx += dy ⊙ y (1 − y)` | x, y
//       | `unary.cpp` · `Sigmoid`
#pragma once
#include <string>
#include <vector>

#include "framework/checks/registry.hpp"

namespace headgrad::checks {

// One row of the table.
struct DerivativeRow {
  std::string family; // the family that registered it
  int place;
  std::string op;       // the ops it covers, separated by ", " or " / ", each with an optional note in
                        // parentheses: "softmax, log_softmax (any axis)"
  std::string forward;
  std::string backward; // the VJP, written for the upstream gradient dy
  std::string saves;    // what the forward keeps for the backward
  std::string where;    // "`file.cpp` · `function`", and the kernels
};

// The rows of one family's markdown; throws std::invalid_argument naming the family and the row
// for a row that is not a place and five cells.
std::vector<DerivativeRow> parse_derivatives(const std::string& family, const char* markdown);

// Every family's rows, sorted by place; throws std::invalid_argument as parse_derivatives does, and
// std::logic_error if two rows share a place.
std::vector<DerivativeRow> derivative_rows();

// The ops a row's op column names ("sum_to / sum / mean", "softmax, log_softmax (any axis)":
// notes in parentheses left out); throws std::invalid_argument for a piece that is not a name.
std::vector<std::string> ops_named_by(const DerivativeRow& row);
// The ops a row covers: those its op column names, then the functions its file · function column
// names after a "·" ("`dropout.cpp` · `dropout_with_mask`": the op whose backward the row is).
std::vector<std::string> ops_covered_by(const DerivativeRow& row);

// The comment line that starts the generated table in DERIVATIVES.md (with_table finds it by its
// first words, kGeneratedTableStart); the table runs from it to the table's last line.
extern const char* const kGeneratedTableStart;
extern const char* const kGeneratedTableComment;

// The comment line, the table's header and one line per row, in the order given.
std::string derivatives_table(const std::vector<DerivativeRow>& rows);

// `doc` (DERIVATIVES.md's text) with its generated table replaced by `table`; throws
// std::invalid_argument if `doc` has no line starting with kGeneratedTableStart.
std::string with_table(const std::string& doc, const std::string& table);

} // namespace headgrad::checks
