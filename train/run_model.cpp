#include "train/run_model.hpp"

#include "models/gpt.hpp"
#include "models/transformer.hpp"

namespace headgrad::train {

std::unique_ptr<models::TokenModel> make_model(const RunConfig& cfg, std::uint64_t seed, DType dtype) {
  if (cfg.is_text()) return std::make_unique<models::GPT>(cfg.gpt_config(), seed, dtype);
  return std::make_unique<models::SequenceModel>(cfg.model_config(), seed, dtype);
}

} // namespace headgrad::train
