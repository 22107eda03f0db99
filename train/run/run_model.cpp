#include "train/run/run_model.hpp"

#include <fmt/format.h>

#include "models/gpt.hpp"
#include "models/transformer.hpp"

namespace headgrad::train {
namespace {

// Sums and products that saturate at INT64_MAX instead of overflowing (hostile metadata).
struct Count {
  std::int64_t v = 0;
  static Count of(std::int64_t x) { return {x}; }
  Count operator+(Count o) const {
    std::int64_t r = 0;
    return {__builtin_add_overflow(v, o.v, &r) ? INT64_MAX : r};
  }
  Count operator*(Count o) const {
    std::int64_t r = 0;
    return {__builtin_mul_overflow(v, o.v, &r) ? INT64_MAX : r};
  }
};

} // namespace

std::unique_ptr<models::TokenModel> make_model(const RunConfig& cfg, std::uint64_t seed, DType dtype) {
  if (cfg.is_text()) return std::make_unique<models::GPT>(cfg.gpt_config(), seed, dtype);
  return std::make_unique<models::SequenceModel>(cfg.model_config(), seed, dtype);
}

std::int64_t parameter_count(const RunConfig& cfg) {
  const Count V = Count::of(cfg.vocab), d = Count::of(cfg.d_model), f = Count::of(cfg.ffn), L = Count::of(cfg.layers);
  const Count one = Count::of(1), two = Count::of(2), four = Count::of(4);
  if (cfg.is_text()) {
    // models/gpt.cpp: wte (V, d), wpe (T, d); per block ln_1 (d), c_attn (3d, d), c_proj (d, d),
    // ln_2 (d), c_fc (f, d), c_proj (d, f), no biases; ln_f (d); lm_head (V, d) unless tied
    const Count T = Count::of(cfg.context);
    const Count block = two * d + four * d * d + two * d * f;
    const Count head = cfg.tie_weights == "on" ? Count::of(0) : V * d;
    return (V * d + T * d + L * block + d + head).v;
  }
  // models/transformer.cpp: embedding (V, d); per block W_q, W_k, W_v, W_o (d, d) without bias,
  // two layer norms (d) + (d), dense1 (f, d) + (f), dense2 (d, f) + (d); dense (V, d) + (V)
  const Count block = four * d * d + four * d + two * d * f + f + d;
  return (V * d + L * block + d * V + V * one).v;
}

} // namespace headgrad::train

namespace headgrad::train {

void visit_parameter_shapes(const RunConfig& cfg, const std::function<bool(const std::string&, const Dims&)>& visit) {
  const std::int64_t V = cfg.vocab, d = cfg.d_model, f = cfg.ffn;
  if (cfg.is_text()) { // models/gpt.cpp
    if (!visit("transformer.wte.weight", {V, d}) || !visit("transformer.wpe.weight", {cfg.context, d})) return;
    for (std::int64_t i = 0; i < cfg.layers; ++i) {
      const std::string b = fmt::format("transformer.h.{}.", i);
      if (!visit(b + "ln_1.weight", {d}) || !visit(b + "attn.c_attn.weight", {3 * d, d}) ||
          !visit(b + "attn.c_proj.weight", {d, d}) || !visit(b + "ln_2.weight", {d}) ||
          !visit(b + "mlp.c_fc.weight", {f, d}) || !visit(b + "mlp.c_proj.weight", {d, f}))
        return;
    }
    if (!visit("transformer.ln_f.weight", {d})) return;
    if (cfg.tie_weights != "on") visit("lm_head.weight", {V, d});
    return;
  }
  // models/transformer.cpp
  if (!visit("embedding.weight", {V, d})) return;
  for (std::int64_t i = 0; i < cfg.layers; ++i) {
    const std::string b = fmt::format("blks.{}.", i);
    for (const char* w : {"W_q", "W_k", "W_v", "W_o"})
      if (!visit(b + "attention." + w + ".weight", {d, d})) return;
    if (!visit(b + "addnorm1.ln.weight", {d}) || !visit(b + "addnorm1.ln.bias", {d}) ||
        !visit(b + "ffn.dense1.weight", {f, d}) || !visit(b + "ffn.dense1.bias", {f}) ||
        !visit(b + "ffn.dense2.weight", {d, f}) || !visit(b + "ffn.dense2.bias", {d}) ||
        !visit(b + "addnorm2.ln.weight", {d}) || !visit(b + "addnorm2.ln.bias", {d}))
      return;
  }
  if (visit("dense.weight", {V, d})) visit("dense.bias", {V});
}

} // namespace headgrad::train
