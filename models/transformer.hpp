// transformer.hpp - d2l's Transformer encoder pieces and the reference sequence model that
// `headgrad train` trains. Parameter names equal a PyTorch state_dict of the same module tree.
#pragma once
#include <memory>
#include <vector>

#include "framework/nn/layers.hpp"
#include "models/attention.hpp"
#include "models/stack_config.hpp"
#include "models/token_model.hpp"

namespace headgrad::models {

// d2l's sinusoidal table: P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d)).
// No parameters; the table (max_len, d) is built once.
class PositionalEncoding : public nn::Module {
public:
  PositionalEncoding(std::int64_t num_hiddens, double dropout, std::int64_t max_len = 1000, std::uint64_t seed = 0,
                     DType dtype = DType::f32);
  Tensor forward(const Tensor& X); // X (B, T, d) -> dropout(X + P[:T])
  Tensor P;                         // (max_len, d)
  std::shared_ptr<nn::Dropout> dropout;
};

// dense2(relu(dense1(x))): (..., d) -> (..., ffn) -> (..., d)
class PositionWiseFFN : public nn::Module {
public:
  PositionWiseFFN(std::int64_t d, std::int64_t ffn_hiddens, std::int64_t d_out, Generator& gen,
                  DType dtype = DType::f32);
  Tensor forward(const Tensor& X) const;
  std::shared_ptr<nn::Linear> dense1, dense2;
};

// ln(dropout(Y) + X)
class AddNorm : public nn::Module {
public:
  AddNorm(std::int64_t d, double dropout, std::uint64_t seed = 0, DType dtype = DType::f32);
  Tensor forward(const Tensor& X, const Tensor& Y);
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::LayerNorm> ln;
};

// Y = addnorm1(X, attention(X, X, X, valid_lens)); out = addnorm2(Y, ffn(Y))
class TransformerEncoderBlock : public nn::Module {
public:
  TransformerEncoderBlock(std::int64_t d, std::int64_t ffn_hiddens, std::int64_t num_heads, double dropout,
                          bool use_bias, Generator& gen, DType dtype = DType::f32);
  Tensor forward(const Tensor& X, const Tensor& valid_lens);
  std::shared_ptr<MultiHeadAttention> attention;
  std::shared_ptr<AddNorm> addnorm1;
  std::shared_ptr<PositionWiseFFN> ffn;
  std::shared_ptr<AddNorm> addnorm2;
};

// The encoder's sizes (StackConfig's defaults: vocab 16, d_model 64, 4 heads, 2 layers, ffn 128)
// and its longest sequence.
struct ModelConfig : StackConfig {
  std::int64_t max_len = 16;
  void validate() const; // std::invalid_argument naming the field and the rule
};

// tokens (B, T) -> embedding * sqrt(d) + P[:T] -> dropout -> blocks -> dense -> logits (B, T, V)
class SequenceModel : public TokenModel {
public:
  SequenceModel(const ModelConfig& cfg, std::uint64_t seed, DType dtype = DType::f32);
  Tensor forward(const Tensor& tokens, const Tensor& valid_lens) override;
  std::unique_ptr<TokenModel> replica(std::uint64_t seed) const override;
  // Attention weights of every block from the last forward: each (B, heads, T, T). With the fused
  // path, call keep_attention_weights(true) before that forward.
  std::vector<Tensor> attention_weights() const override;
  void keep_attention_weights(bool on) override;

  ModelConfig config;
  std::shared_ptr<nn::Embedding> embedding;
  std::shared_ptr<PositionalEncoding> pos_encoding;
  std::vector<std::shared_ptr<TransformerEncoderBlock>> blks;
  std::shared_ptr<nn::Linear> dense;
};

} // namespace headgrad::models
