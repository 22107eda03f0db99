#include "train/cli/explain/example.hpp"

#include <fmt/format.h>
#include <stdexcept>

#include "framework/io/safetensors.hpp"
#include "framework/random.hpp"

namespace headgrad::cli::explain {
namespace {

constexpr DType f64 = DType::f64;

// The sizes: from the options, or from the fixture's tensors and its num_heads metadata.
Example sizes_of(const ExplainOptions& o, const io::SafetensorsFile* fx) {
  Example e;
  e.B = o.batch;
  e.Tq = o.queries;
  e.Tk = o.keys;
  e.q_size = e.k_size = e.v_size = e.h = o.hidden;
  e.H = o.heads;
  if (fx) {
    const Dims qs = fx->at("queries").shape(), ks = fx->at("keys").shape(), vs = fx->at("values").shape();
    if (qs.size() != 3 || ks.size() != 3 || vs.size() != 3)
      throw std::invalid_argument(fmt::format("{}: queries/keys/values must be 3-D", o.fixture));
    e.B = qs[0];
    e.Tq = qs[1];
    e.q_size = qs[2];
    e.Tk = ks[1];
    e.k_size = ks[2];
    e.v_size = vs[2];
    e.h = fx->at("W_o.weight").shape()[0];
    auto it = fx->metadata.find("num_heads");
    if (it == fx->metadata.end()) throw std::invalid_argument(fmt::format("{}: metadata lacks num_heads", o.fixture));
    e.H = std::stoll(it->second);
  }
  return e;
}

void check_sizes(const Example& e, const ExplainOptions& o) {
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
  if (!o.fixture.empty() && o.bias)
    throw std::invalid_argument("--bias: the fixtures' modules have no biases (leave --bias out with --fixture)");
  if (o.fixture.empty() && (o.valid_len < 0 || o.valid_len > e.Tk))
    throw std::invalid_argument(fmt::format("--valid-len must be in [0, --keys = {}], got {}", e.Tk, o.valid_len));
}

// Inputs and R from the generator that drew the weights (this order fixes the numbers).
void fill_random(Example& e, const ExplainOptions& o, Generator& gen) {
  e.queries = Tensor::normal({e.B, e.Tq, e.h}, 0, 1, gen, f64);
  e.keys = Tensor::normal({e.B, e.Tk, e.h}, 0, 1, gen, f64);
  e.values = Tensor::normal({e.B, e.Tk, e.h}, 0, 1, gen, f64);
  e.valid_lens = Tensor::from_ints(std::vector<std::int64_t>(static_cast<std::size_t>(e.B), o.valid_len), {e.B});
  e.R = Tensor::normal({e.B, e.Tq, e.h}, 0, 1, gen, f64);
  e.source = fmt::format("random values, seed {}", o.seed);
}

void fill_from_fixture(Example& e, const ExplainOptions& o, const io::SafetensorsFile& fx) {
  e.mha->load_parameters({{"W_q.weight", fx.at("W_q.weight")}, {"W_k.weight", fx.at("W_k.weight")},
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

} // namespace

Tensor Example::pytorch_grad(const std::string& name) const {
  auto it = pytorch.find(name);
  return it == pytorch.end() ? Tensor() : it->second;
}

Example make_example(const ExplainOptions& o) {
  if (o.precision < 0 || o.precision > 12)
    throw std::invalid_argument(fmt::format("--precision must be in [0, 12], got {}", o.precision));
  io::SafetensorsFile fx;
  if (!o.fixture.empty()) fx = io::load_safetensors(o.fixture);
  Example e = sizes_of(o, o.fixture.empty() ? nullptr : &fx);
  check_sizes(e, o);
  e.d = e.h / e.H;
  Generator gen(o.seed);
  // d2l's signature (key_size, query_size, value_size, num_hiddens, num_heads, dropout, bias)
  e.mha = std::make_unique<models::MultiHeadAttention>(e.k_size, e.q_size, e.v_size, e.h, e.H, 0.0, o.bias, gen, f64);
  if (o.fixture.empty()) fill_random(e, o, gen);
  else fill_from_fixture(e, o, fx);
  e.queries.set_requires_grad();
  e.keys.set_requires_grad();
  e.values.set_requires_grad();
  return e;
}

} // namespace headgrad::cli::explain
