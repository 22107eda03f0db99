// gradcheck_models.cpp - gradient-check rows for the attention stack and layers (filled in as
// the models land).
#include "train/gradcheck_table.hpp"

namespace headgrad {

std::vector<GradcheckCase> model_gradcheck_cases() { return {}; }

} // namespace headgrad
