#include "train/explain/example.hpp"

#include <fmt/format.h>
#include <optional>
#include <stdexcept>

#include "framework/io/restore.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "train/explain/input_file.hpp"

namespace headgrad::cli::explain {
namespace {

constexpr DType f64 = DType::f64;

// The sizes that queries (B, Tq, q_size), keys (B, Tk, k_size) and values (B, Tk, v_size) show.
void sizes_from_shapes(Example& e, const Dims& queries, const Dims& keys, const Dims& values) {
  e.B = queries[0];
  e.Tq = queries[1];
  e.q_size = queries[2];
  e.Tk = keys[1];
  e.k_size = keys[2];
  e.v_size = values[2];
}

// The sizes: from the options, from the fixture's tensors and its num_heads metadata, or from your
// input file's tensors and settings.
Example sizes_of(const ExplainOptions& o, const io::SafetensorsFile* fx, const InputFile* in) {
  Example e;
  e.B = o.batch;
  e.Tq = o.self_attention ? o.keys : o.queries; // self-attention: one sequence of --keys positions
  e.Tk = o.keys;
  e.q_size = e.k_size = e.v_size = e.h = o.hidden;
  e.H = o.heads;
  if (in) {
    const Dims qs = in->tensors.at("queries").shape(), ks = in->tensors.at("keys").shape(),
               vs = in->tensors.at("values").shape();
    sizes_from_shapes(e, qs, ks, vs);
    e.h = in->num_hiddens;
    e.H = in->num_heads;
  }
  if (fx) {
    const Dims qs = fx->at("queries").shape(), ks = fx->at("keys").shape(), vs = fx->at("values").shape();
    if (qs.size() != 3 || ks.size() != 3 || vs.size() != 3)
      throw std::invalid_argument(fmt::format("{}: queries/keys/values must be 3-D", o.fixture));
    sizes_from_shapes(e, qs, ks, vs);
    e.h = fx->at("W_o.weight").shape()[0];
    auto it = fx->metadata.find("num_heads");
    if (it == fx->metadata.end()) throw std::invalid_argument(fmt::format("{}: metadata lacks num_heads", o.fixture));
    e.H = std::stoll(it->second);
  }
  return e;
}

void check_options(const Example& e, const ExplainOptions& o) {
  auto positive = [](std::int64_t v, const char* flag) {
    if (v < 1) throw std::invalid_argument(fmt::format("--{} must be at least 1, got {}", flag, v));
  };
  positive(e.B, "batch");
  positive(e.Tq, "queries");
  positive(e.Tk, "keys");
  positive(e.h, "hidden");
  positive(e.H, "heads");
  if (e.h % e.H != 0)
    throw std::invalid_argument(fmt::format("--hidden ({}) must be divisible by --heads ({})", e.h, e.H));
  if (o.loss != "r" && o.loss != "cross-entropy")
    throw std::invalid_argument(fmt::format("--loss must be r or cross-entropy, got '{}'", o.loss));
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw std::invalid_argument(fmt::format("--dropout must be in [0, 1), got {}", o.dropout));
  if (o.fused && o.dropout > 0)
    throw std::invalid_argument("--fused: the fused attention op has no dropout (leave out --dropout or --fused)");
  if (!o.fixture.empty()) {
    if (o.bias)
      throw std::invalid_argument("--bias: the fixtures' modules have no biases (leave --bias out with --fixture)");
    for (const auto& [on, flag] : {std::pair{o.self_attention, "--self-attention"}, std::pair{o.causal, "--causal"},
                                   std::pair{o.loss != "r", "--loss"}, std::pair{o.dropout > 0, "--dropout"}})
      if (on) throw std::invalid_argument(fmt::format("{}: the fixtures hold d2l's module on three inputs with their "
                                                      "own valid_lens and R (leave {} out with --fixture)",
                                                      flag, flag));
  }
  if (!o.input.empty()) {
    if (!o.fixture.empty()) throw std::invalid_argument("--input and --fixture: give one of them");
    if (o.self_attention || o.causal)
      throw std::invalid_argument(fmt::format("{}: --input FILE gives the inputs and valid_lens (leave it out, or "
                                              "write the per-query lengths into the file)",
                                              o.self_attention ? "--self-attention" : "--causal"));
  }
  if (o.fixture.empty() && o.input.empty() && (o.valid_len < 0 || o.valid_len > e.Tk))
    throw std::invalid_argument(fmt::format("--valid-len must be in [0, --keys = {}], got {}", e.Tk, o.valid_len));
}

// valid_lens: one length per batch row, or with causal one per query, min(i + 1, valid_len)
// (d2l's decoder masks with dec_valid_lens = arange(1, T + 1) the same way).
Tensor lengths(const Example& e, const ExplainOptions& o) {
  if (!o.causal) return Tensor::from_ints(std::vector<std::int64_t>(static_cast<std::size_t>(e.B), o.valid_len), {e.B});
  std::vector<std::int64_t> v;
  for (std::int64_t b = 0; b < e.B; ++b)
    for (std::int64_t i = 0; i < e.Tq; ++i) v.push_back(std::min(i + 1, o.valid_len));
  return Tensor::from_ints(v, {e.B, e.Tq});
}

// Inputs and R from the generator that drew the weights (this order fixes the numbers: the default
// example's are the same whatever flags add draws after them).
void fill_random(Example& e, const ExplainOptions& o, Generator& gen) {
  if (o.self_attention) {
    e.queries = e.keys = e.values = Tensor::normal({e.B, e.Tk, e.h}, 0, 1, gen, f64);
  } else {
    e.queries = Tensor::normal({e.B, e.Tq, e.h}, 0, 1, gen, f64);
    e.keys = Tensor::normal({e.B, e.Tk, e.h}, 0, 1, gen, f64);
    e.values = Tensor::normal({e.B, e.Tk, e.h}, 0, 1, gen, f64);
  }
  e.valid_lens = lengths(e, o);
  e.R = Tensor::normal({e.B, e.Tq, e.h}, 0, 1, gen, f64);
  if (e.cross_entropy) {
    std::vector<std::int64_t> t;
    for (std::int64_t i = 0; i < e.B * e.Tq; ++i) t.push_back(static_cast<std::int64_t>(gen.below(e.h)));
    e.targets = Tensor::from_ints(t, {e.B, e.Tq});
    const std::vector<std::int64_t> lens(static_cast<std::size_t>(e.B), o.valid_len);
    e.loss_mask = ops::sequence_mask(Tensor::from_ints(lens, {e.B}), e.Tq);
  }
  if (e.p > 0) { // as ops::dropout draws its mask: an entry is dropped with probability p
    e.drop_mask = Tensor::zeros({e.B * e.H, e.Tq, e.Tk}, f64);
    double* m = e.drop_mask.data<double>();
    for (std::int64_t i = 0; i < e.drop_mask.numel(); ++i) m[i] = gen.uniform() < e.p ? 0.0 : 1.0;
  }
  e.source = fmt::format("random values, seed {}", o.seed);
}

// Your file's tensors; what it leaves out is random from the generator that drew the weights: the
// `normal` tensors in the file's order, then R, then (cross-entropy) the targets, then (dropout) the
// mask. Without valid_lens every key is kept.
void fill_from_input(Example& e, const ExplainOptions& o, InputFile in, Generator& gen) {
  for (const std::string& name : in.normal) {
    Tensor& t = in.tensors.at(name);
    t = Tensor::normal(t.shape(), 0, 1, gen, f64);
  }
  for (const auto& [name, other] : in.aliases) in.tensors.at(name) = in.tensors.at(other).clone();
  NamedTensors weights;
  for (const auto& [name, p] : e.mha->named_parameters())
    weights.emplace_back(name, in.has(name) ? in.tensors.at(name) : p.detach().clone());
  io::restore_parameters(*e.mha, weights, o.input);
  e.queries = in.tensors.at("queries");
  e.keys = in.tensors.at("keys");
  e.values = in.tensors.at("values");
  e.valid_lens = in.has("valid_lens")
                     ? in.tensors.at("valid_lens")
                     : Tensor::from_ints(std::vector<std::int64_t>(static_cast<std::size_t>(e.B), e.Tk), {e.B});
  e.R = in.has("grad_output") ? in.tensors.at("grad_output") : Tensor::normal({e.B, e.Tq, e.h}, 0, 1, gen, f64);
  if (e.cross_entropy) { // a position counts when it is within its row's valid length (every one with 2-D lengths)
    std::vector<std::int64_t> t;
    for (std::int64_t i = 0; i < e.B * e.Tq; ++i) t.push_back(static_cast<std::int64_t>(gen.below(e.h)));
    e.targets = Tensor::from_ints(t, {e.B, e.Tq});
    const std::vector<std::int64_t> all(static_cast<std::size_t>(e.B), e.Tq);
    e.loss_mask = ops::sequence_mask(e.valid_lens.dim() == 1 ? e.valid_lens : Tensor::from_ints(all, {e.B}), e.Tq);
  }
  if (e.p > 0) {
    e.drop_mask = Tensor::zeros({e.B * e.H, e.Tq, e.Tk}, f64);
    double* m = e.drop_mask.data<double>();
    for (std::int64_t i = 0; i < e.drop_mask.numel(); ++i) m[i] = gen.uniform() < e.p ? 0.0 : 1.0;
  }
  e.source = fmt::format("values from {} (the rest random, seed {})", o.input, o.seed);
}

void fill_from_fixture(Example& e, const ExplainOptions& o, const io::SafetensorsFile& fx) {
  io::restore_parameters(*e.mha, {{"W_q.weight", fx.at("W_q.weight")}, {"W_k.weight", fx.at("W_k.weight")},
                          {"W_v.weight", fx.at("W_v.weight")}, {"W_o.weight", fx.at("W_o.weight")}},
                         o.fixture);
  e.queries = fx.at("queries").to(f64).contiguous();
  e.keys = fx.at("keys").to(f64).contiguous();
  e.values = fx.at("values").to(f64).contiguous();
  e.valid_lens = fx.at("valid_lens");
  e.R = fx.at("grad_output").to(f64).contiguous();
  e.source = "values from " + o.fixture;
  for (const auto& [name, t] : fx.tensors)
    if (name.rfind("grad", 0) == 0) e.pytorch[name] = t.to(f64).contiguous();
}

// keep[b, i, j] = j < valid_lens[b] (or [b, i])
Tensor keep_of(const Example& e) {
  const auto lens = e.valid_lens.to_int_vector();
  const bool per_query = e.valid_lens.dim() == 2;
  Tensor keep = Tensor::zeros({e.B, e.Tq, e.Tk}, DType::bool8);
  bool* k = keep.data<bool>();
  for (std::int64_t b = 0; b < e.B; ++b)
    for (std::int64_t i = 0; i < e.Tq; ++i)
      for (std::int64_t j = 0; j < e.Tk; ++j)
        k[(b * e.Tq + i) * e.Tk + j] = j < lens[static_cast<std::size_t>(per_query ? b * e.Tq + i : b)];
  return keep;
}

} // namespace

Tensor Example::pytorch_grad(const std::string& name) const {
  auto it = pytorch.find(name);
  return it == pytorch.end() ? Tensor() : it->second;
}

Tensor Example::loss(const Tensor& Y) const {
  return cross_entropy ? ops::cross_entropy(Y, targets, loss_mask) : ops::sum(Y * R);
}

NamedTensors Example::inputs() const {
  if (self_attention) return {{"X", queries}};
  return {{"queries", queries}, {"keys", keys}, {"values", values}};
}

Example make_example(const ExplainOptions& o) {
  if (o.precision < 0 || o.precision > 12)
    throw std::invalid_argument(fmt::format("--precision must be in [0, 12], got {}", o.precision));
  io::SafetensorsFile fx;
  if (!o.fixture.empty()) fx = io::load_safetensors(o.fixture);
  std::optional<InputFile> in;
  if (!o.input.empty()) in = read_input_file(o.input);
  Example e = sizes_of(o, o.fixture.empty() ? nullptr : &fx, in ? &*in : nullptr);
  check_options(e, o);
  e.d = e.h / e.H;
  e.self_attention = o.self_attention;
  e.causal = o.causal;
  e.p = o.dropout;
  e.cross_entropy = o.loss == "cross-entropy";
  Generator gen(o.seed);
  // d2l's 0.17 signature (key_size, query_size, value_size, num_hiddens, num_heads, dropout, bias); the
  // module's own dropout stays 0: explain applies p with a fixed mask, so that every run (and the
  // gradient check's every evaluation) sees the same one
  e.mha = std::make_unique<models::MultiHeadAttention>(e.k_size, e.q_size, e.v_size, e.h, e.H, 0.0, o.bias, gen, f64);
  if (in) fill_from_input(e, o, std::move(*in), gen);
  else if (o.fixture.empty()) fill_random(e, o, gen);
  else fill_from_fixture(e, o, fx);
  e.keep = keep_of(e);
  for (auto& [name, t] : e.inputs()) t.set_requires_grad();
  return e;
}

} // namespace headgrad::cli::explain
