#include "train/cli/gradcheck_table.hpp"

#include <algorithm>

namespace headgrad::cli {

std::vector<GradcheckCase> all_gradcheck_cases() {
  std::vector<GradcheckCase> all = op_gradcheck_cases();
  for (auto& c : model_gradcheck_cases()) all.push_back(std::move(c));
  return all;
}

GradcheckRow run_gradcheck_case(const GradcheckCase& c) {
  GradcheckRow row{&c, c.run ? c.run(c.options) : gradcheck(c.fn, c.make_inputs(), c.options), 0.0, 0.0};
  for (const auto& r : row.result.inputs) {
    row.max_abs_err = std::max(row.max_abs_err, r.max_abs_err);
    row.max_rel_err = std::max(row.max_rel_err, r.max_rel_err);
  }
  return row;
}

} // namespace headgrad::cli
