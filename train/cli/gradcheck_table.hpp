// gradcheck_table.hpp - the table of gradient-check cases: every differentiable op and model,
// each with several shapes. `headgrad gradcheck` prints it; tests/test_gradcheck_table.cpp
// asserts every row passes. Adding an op means adding rows here.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "framework/gradcheck.hpp"

namespace headgrad::cli {

struct GradcheckCase {
  std::string group;   // "ops", "attention", "layers", ...
  std::string name;    // e.g. "matmul batched broadcast"
  std::string shapes;  // e.g. "[2, 1, 3, 4] @ [5, 4, 2]"
  // Builds fresh float64 inputs (from a fixed seed) and the function to check.
  std::function<std::vector<Tensor>()> make_inputs;
  GradcheckFn fn;
  GradcheckOptions options = {};
  // Cases that check tensors the function reads by itself (a module's weights) set this instead
  // of make_inputs/fn; it builds everything and calls gradcheck_leaves.
  std::function<GradcheckResult(const GradcheckOptions&)> run = nullptr;
};

std::vector<GradcheckCase> op_gradcheck_cases();    // gradcheck_ops.cpp
std::vector<GradcheckCase> model_gradcheck_cases(); // gradcheck_models.cpp
std::vector<GradcheckCase> all_gradcheck_cases();   // ops then models

struct GradcheckRow {
  const GradcheckCase* c;
  GradcheckResult result;
  double max_abs_err, max_rel_err; // over all checked inputs
};
GradcheckRow run_gradcheck_case(const GradcheckCase& c);

} // namespace headgrad::cli
