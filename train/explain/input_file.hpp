// input_file.hpp - `headgrad explain --input FILE`: a small text file of your own example's tensors
// and sizes (queries, keys, values, valid_lens, num_heads, and optionally the weights and the
// upstream gradient), so that a case from d2l's chapter, or one you computed elsewhere, runs
// through explain. docs/backprop-through-attention.md ("Your own example") describes the format:
//
//   # a line from '#' on is a comment
//   num_heads 2                   a setting: num_heads (required), num_hiddens (default: from the
//   num_hiddens 4                 weights the file gives, else the queries' feature size)
//   queries [2, 1, 4] = 0.5 -1 0 2  a tensor: its name, its shape, '=', its values in row-major
//     1 2 3 4                       order (spaces or commas; they may go on over the next lines),
//   keys [2, 3, 4] = ones           or ones, zeros, normal (N(0, 1) from --seed)
//   values = keys                   the same numbers as another tensor of the file
//   valid_lens [2] = 1 3            int64: (batch) or (batch, queries)
//
// Tensors: queries, keys, values (required), valid_lens, W_q.weight, W_k.weight, W_v.weight,
// W_o.weight (nn.Linear's (out, in) layout; default random from --seed, as explain's own) and
// grad_output (R of L = sum(Y * R); default random). A file that breaks a rule is refused with one
// line naming the file and the line: "my.txt:3: keys: 11 values for shape [2, 3, 4] (24)".
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad::cli::explain {

struct InputFile {
  std::string path;
  std::int64_t num_heads = 0;   // required
  std::int64_t num_hiddens = 0; // as given; else the rows of the first weight given; else the queries' features
  // By name, float64 (valid_lens int64). The tensors given as `normal` are drawn by the example
  // from --seed, in the file's order (here they hold zeros), and then each alias `name = other`,
  // in the file's order, copies its tensor again.
  std::map<std::string, Tensor> tensors;
  std::vector<std::string> normal;
  std::vector<std::pair<std::string, std::string>> aliases; // (name, other)
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
};

// Reads and checks `path` (names, shapes, counts, the required entries; valid_lens whole and
// non-negative). Throws std::invalid_argument "PATH:LINE: what is wrong" (one line).
InputFile read_input_file(const std::string& path);

} // namespace headgrad::cli::explain
