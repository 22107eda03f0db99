#include "models/transformer.hpp"

#include <cmath>
#include <fmt/format.h>

#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"

namespace headgrad::models {

PositionalEncoding::PositionalEncoding(std::int64_t d, double p, std::int64_t max_len, std::uint64_t seed, DType dtype) {
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, seed));
  std::vector<double> table(static_cast<std::size_t>(max_len * d));
  for (std::int64_t i = 0; i < max_len; ++i)
    for (std::int64_t j = 0; j < d; j += 2) {
      // X = i / 10000^(j / d) for the even column j = 2k
      const double x = static_cast<double>(i) / std::pow(10000.0, static_cast<double>(j) / static_cast<double>(d));
      table[static_cast<std::size_t>(i * d + j)] = std::sin(x);
      if (j + 1 < d) table[static_cast<std::size_t>(i * d + j + 1)] = std::cos(x);
    }
  P = Tensor::from(table, {max_len, d}, dtype);
}

Tensor PositionalEncoding::forward(const Tensor& X) {
  // X: (B, T, d); P[:T]: (T, d) broadcast over the batch
  if (X.dim() != 3 || X.shape()[2] != P.shape()[1] || X.shape()[1] > P.shape()[0])
    throw std::invalid_argument(fmt::format("PositionalEncoding: input {} does not fit the table {}", X.shape(),
                                            P.shape()));
  return dropout->forward(X + P.slice(0, 0, X.shape()[1]));
}

PositionWiseFFN::PositionWiseFFN(std::int64_t d, std::int64_t f, std::int64_t d_out, Generator& gen, DType dtype) {
  dense1 = register_module("dense1", std::make_shared<nn::Linear>(d, f, true, gen, dtype));
  dense2 = register_module("dense2", std::make_shared<nn::Linear>(f, d_out, true, gen, dtype));
}

Tensor PositionWiseFFN::forward(const Tensor& X) const {
  // (B, T, d) -> (B, T, ffn) -> (B, T, d); dense1 and the ReLU as one op
  return dense2->forward(ops::linear_relu(X, dense1->weight, dense1->bias));
}

AddNorm::AddNorm(std::int64_t d, double p, std::uint64_t seed, DType dtype) {
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, seed));
  ln = register_module("ln", std::make_shared<nn::LayerNorm>(d, 1e-5, dtype));
}

// ln(dropout(Y) + X), the add and the norm as one op
Tensor AddNorm::forward(const Tensor& X, const Tensor& Y) {
  return ops::add_layer_norm(dropout->forward(Y), X, ln->weight, ln->bias, ln->eps);
}

TransformerEncoderBlock::TransformerEncoderBlock(std::int64_t d, std::int64_t f, std::int64_t heads, double p,
                                                 bool use_bias, Generator& gen, DType dtype) {
  attention = register_module("attention", std::make_shared<MultiHeadAttention>(d, d, d, d, heads, p, use_bias, gen, dtype));
  addnorm1 = register_module("addnorm1", std::make_shared<AddNorm>(d, p, gen.next_u64(), dtype));
  ffn = register_module("ffn", std::make_shared<PositionWiseFFN>(d, f, d, gen, dtype));
  addnorm2 = register_module("addnorm2", std::make_shared<AddNorm>(d, p, gen.next_u64(), dtype));
}

Tensor TransformerEncoderBlock::forward(const Tensor& X, const Tensor& valid_lens) {
  // X: (B, T, d)
  Tensor Y = addnorm1->forward(X, attention->forward(X, X, X, valid_lens)); // (B, T, d)
  return addnorm2->forward(Y, ffn->forward(Y));                             // (B, T, d)
}

void ModelConfig::validate() const {
  validate_stack(*this);
  if (max_len <= 0) throw std::invalid_argument(fmt::format("max_len must be positive, got {}", max_len));
}

SequenceModel::SequenceModel(const ModelConfig& cfg, std::uint64_t seed, DType dtype) : config(cfg) {
  cfg.validate();
  Generator gen(seed);
  embedding = register_module("embedding", std::make_shared<nn::Embedding>(cfg.vocab, cfg.d_model, gen, dtype));
  pos_encoding = std::make_shared<PositionalEncoding>(cfg.d_model, cfg.dropout, std::max<std::int64_t>(cfg.max_len, 1),
                                                      gen.next_u64(), dtype);
  register_module("pos_encoding", pos_encoding); // no parameters; registered for train()/eval()
  for (std::int64_t i = 0; i < cfg.layers; ++i) {
    blks.push_back(register_module(fmt::format("blks.{}", i),
                                   std::make_shared<TransformerEncoderBlock>(cfg.d_model, cfg.ffn, cfg.heads,
                                                                             cfg.dropout, false, gen, dtype)));
    blks.back()->attention->path = cfg.attention;
  }
  dense = register_module("dense", std::make_shared<nn::Linear>(cfg.d_model, cfg.vocab, true, gen, dtype));
}

Tensor SequenceModel::forward(const Tensor& tokens, const Tensor& valid_lens) {
  // tokens: (B, T) int64; valid_lens: (B) int64
  if (tokens.dim() != 2 || tokens.shape()[1] > config.max_len)
    throw std::invalid_argument(fmt::format("SequenceModel: tokens must be (batch, T <= {}), got {}", config.max_len,
                                            tokens.shape()));
  // (B, T, d): embeddings are scaled by sqrt(d) so they are not drowned by the positional table
  Tensor X = pos_encoding->forward(embedding->forward(tokens) * std::sqrt(static_cast<double>(config.d_model)));
  for (auto& blk : blks) X = blk->forward(X, valid_lens); // (B, T, d)
  return dense->forward(X);                                 // (B, T, V)
}

std::unique_ptr<TokenModel> SequenceModel::replica(std::uint64_t seed) const {
  return std::make_unique<SequenceModel>(config, seed, embedding->weight.dtype());
}

void SequenceModel::keep_attention_weights(bool on) {
  for (auto& blk : blks) blk->attention->weights.keep = on;
}

std::vector<Tensor> SequenceModel::attention_weights() const {
  std::vector<Tensor> out;
  for (const auto& blk : blks) out.push_back(blk->attention->attention_weights());
  return out;
}

} // namespace headgrad::models
