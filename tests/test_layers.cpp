// framework/nn: Linear, LayerNorm, Embedding, Dropout, and the Module contract (dotted parameter
// names in PyTorch state_dict order for the reference model, train/eval propagation, zero_grad),
// and io::restore_parameters (framework/io/restore.hpp) into a module, with its refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/core/gradcheck.hpp"
#include "framework/nn/layers.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/random.hpp"
#include "framework/io/restore.hpp"
#include "framework/optim/optimizer.hpp"
#include "models/transformer.hpp"
#include "tests/test_support.hpp"
#include "tests/tiny_models.hpp"

using namespace headgrad;
using test_support::contains;
using test_support::error_of;
using test_support::randn;

namespace {

models::ModelConfig small_config() {
  return tiny::encoder({.vocab = 7, .d_model = 8, .heads = 2, .layers = 2, .ffn = 12}, /*max_len=*/5);
}

} // namespace

TEST_CASE("Linear: init bounds +-1/sqrt(in) for weight and bias") {
  Generator g(1);
  nn::Linear lin(25, 40, true, g);
  const double bound = 1.0 / std::sqrt(25.0);
  CHECK(lin.weight.shape() == Dims{40, 25});
  CHECK(lin.bias.shape() == Dims{40});
  CHECK(lin.weight.dtype() == DType::f32);
  for (const Tensor& t : {lin.weight, lin.bias}) {
    double lo = 1e9, hi = -1e9;
    for (double v : t.to_vector()) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    if (t.numel() > 100) { // 1000 draws fill the interval
      CHECK(lo < -0.9 * bound);
      CHECK(hi > 0.9 * bound);
    }
  }
  CHECK(lin.weight.requires_grad());
  const auto names = lin.named_parameters();
  REQUIRE(names.size() == 2);
  CHECK(names[0].first == "weight");
  CHECK(names[1].first == "bias");

  Generator g2(1);
  nn::Linear nobias(3, 2, false, g2);
  CHECK_FALSE(nobias.bias.defined());
  CHECK(nobias.named_parameters().size() == 1);
  CHECK_THROWS_AS(nn::Linear(0, 2, true, g2), std::invalid_argument);
}

TEST_CASE("Linear: inputs of rank 1, 2, 3 and 4 map the last axis") {
  Generator g(2);
  nn::Linear lin(4, 3, true, g, DType::f64);
  const auto W = lin.weight.to_vector(), b = lin.bias.to_vector();
  const std::vector<Dims> shapes = {{4}, {5, 4}, {2, 3, 4}, {2, 1, 3, 4}};
  for (const Dims& s : shapes) {
    CAPTURE(s.str());
    Tensor x = randn(s, 3);
    Tensor y = lin.forward(x);
    Dims want = s;
    want[want.size() - 1] = 3;
    CHECK(y.shape() == want);
    // every row against y = x W^T + b
    const auto xv = x.to_vector(), yv = y.to_vector();
    const std::size_t rows = xv.size() / 4;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < 3; ++o) {
        double acc = b[o];
        for (std::size_t i = 0; i < 4; ++i) acc += xv[r * 4 + i] * W[o * 4 + i];
        CHECK(yv[r * 3 + o] == doctest::Approx(acc).epsilon(1e-12));
      }
  }
  CHECK_THROWS_AS(lin.forward(randn({2, 5}, 4)), std::invalid_argument);
}

TEST_CASE("LayerNorm: default weight/bias give mean 0, variance 1 per row") {
  nn::LayerNorm ln(16, 1e-5, DType::f64);
  CHECK(ln.weight.to_vector() == std::vector<double>(16, 1.0));
  CHECK(ln.bias.to_vector() == std::vector<double>(16, 0.0));
  Tensor x = randn({3, 4, 16}, 5) * 3.0 + 7.0;
  Tensor y = ln.forward(x);
  CHECK(y.shape() == Dims{3, 4, 16});
  const auto v = y.to_vector();
  for (std::size_t r = 0; r < 12; ++r) {
    double m = 0, q = 0;
    for (std::size_t j = 0; j < 16; ++j) m += v[r * 16 + j];
    m /= 16;
    for (std::size_t j = 0; j < 16; ++j) q += (v[r * 16 + j] - m) * (v[r * 16 + j] - m);
    q /= 16; // biased, as PyTorch normalises
    CHECK(std::abs(m) < 1e-12);
    CHECK(q == doctest::Approx(1.0).epsilon(1e-4)); // var / (var + eps) with var ~ 9
  }
  const auto names = ln.named_parameters();
  REQUIRE(names.size() == 2);
  CHECK(names[0].first == "weight");
  CHECK(names[1].first == "bias");
}

TEST_CASE("Embedding: lookups return weight rows") {
  Generator g(6);
  nn::Embedding emb(10, 4, g, DType::f64);
  CHECK(emb.weight.shape() == Dims{10, 4});
  Tensor tok = Tensor::from_ints({3, 0, 9, 3, 1, 2}, {2, 3});
  Tensor y = emb.forward(tok);
  CHECK(y.shape() == Dims{2, 3, 4});
  const auto W = emb.weight.to_vector(), yv = y.to_vector();
  const std::vector<std::int64_t> ids = {3, 0, 9, 3, 1, 2};
  for (std::size_t k = 0; k < ids.size(); ++k)
    for (std::size_t j = 0; j < 4; ++j) CHECK(yv[k * 4 + j] == W[static_cast<std::size_t>(ids[k]) * 4 + j]);
  // N(0, 1) init: the mean and spread of 40 draws are plausible
  double m = 0;
  for (double v : W) m += v;
  CHECK(std::abs(m / 40) < 0.6);
  CHECK_THROWS(emb.forward(Tensor::from_ints({10}, {1}))); // out of range
}

TEST_CASE("Dropout") {
  Tensor x = Tensor::ones({100, 100}, DType::f64);
  SUBCASE("eval mode is the identity") {
    nn::Dropout d(0.5, 1);
    d.eval();
    CHECK(d.forward(x).to_vector() == x.to_vector());
  }
  SUBCASE("p = 0 is the identity in train mode") {
    nn::Dropout d(0.0, 1);
    CHECK(d.training());
    CHECK(d.forward(x).to_vector() == x.to_vector());
  }
  SUBCASE("train mode: zero fraction ~ p, kept values scaled by 1/(1-p)") {
    for (double p : {0.1, 0.3, 0.7}) {
      CAPTURE(p);
      nn::Dropout d(p, 42);
      const auto v = d.forward(x).to_vector();
      std::size_t zeros = 0, scaled = 0;
      for (double e : v) {
        if (e == 0.0) ++zeros;
        else if (std::abs(e - 1.0 / (1.0 - p)) < 1e-12) ++scaled;
      }
      CHECK(zeros + scaled == v.size()); // every element is either dropped or scaled
      // 10000 Bernoulli(p) draws: the standard deviation of the fraction is < 0.005
      CHECK(std::abs(static_cast<double>(zeros) / 10000.0 - p) < 0.025);
    }
  }
  SUBCASE("deterministic per seed; the stream advances between calls") {
    nn::Dropout a(0.5, 7), b(0.5, 7), c(0.5, 8);
    const auto va = a.forward(x).to_vector();
    CHECK(va == b.forward(x).to_vector());
    CHECK(va != c.forward(x).to_vector());
    CHECK(a.forward(x).to_vector() != va); // second call: a new mask
  }
  SUBCASE("layers built without a seed draw independent masks, the same on every run") {
    nn::seed_dropout(5);
    nn::Dropout a(0.5), b(0.5);
    const auto va = a.forward(x).to_vector(), vb = b.forward(x).to_vector();
    CHECK(va != vb); // seed 0 for both drew one mask twice
    nn::seed_dropout(5); // as a program that builds its layers in the same order again
    nn::Dropout c(0.5), d(0.5);
    CHECK(c.forward(x).to_vector() == va);
    CHECK(d.forward(x).to_vector() == vb);
    nn::seed_dropout(6);
    nn::Dropout e(0.5);
    CHECK(e.forward(x).to_vector() != va);
  }
  SUBCASE("gradient flows through kept elements only") {
    Tensor w = Tensor::ones({4, 5}, DType::f64);
    w.set_requires_grad(true);
    nn::Dropout d(0.5, 3);
    Tensor y = d.forward(w);
    ops::sum(y).backward();
    const auto yv = y.to_vector(), gv = w.grad().to_vector();
    for (std::size_t i = 0; i < yv.size(); ++i) CHECK(gv[i] == yv[i]); // d(x*m/(1-p))/dx = m/(1-p) = y at x = 1
  }
  SUBCASE("p outside [0, 1) throws") {
    for (double p : {-0.1, 1.0, 1.5, std::nan("")}) {
      CAPTURE(p);
      const std::string msg = error_of<std::invalid_argument>([&] { nn::Dropout d(p); });
      CHECK(contains(msg, "Dropout"));
      CHECK(contains(msg, "[0, 1)"));
    }
  }
}

TEST_CASE("GELU module: the erf form by default and the tanh form on request") {
  const Tensor x = randn({3, 4}, 11);
  nn::GELU exact, approx(ops::GeluApproximate::tanh);
  CHECK(exact.named_parameters().empty());
  CHECK(exact.forward(x).to_vector() == ops::gelu(x, ops::GeluApproximate::none).to_vector());
  CHECK(approx.forward(x).to_vector() == ops::gelu(x, ops::GeluApproximate::tanh).to_vector());
  CHECK(exact.forward(x).to_vector() != approx.forward(x).to_vector());
}

TEST_CASE("SequenceModel named_parameters: PyTorch state_dict names, order and shapes") {
  const models::ModelConfig cfg = small_config();
  models::SequenceModel model(cfg, 0);
  const auto got = model.named_parameters();
  const auto want = tiny::encoder_state_dict(cfg);
  REQUIRE(got.size() == want.size());
  CHECK(got.size() == 2 + 12 * 2 + 1);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second.shape() == want[i].second);
    CHECK(got[i].second.requires_grad());
    total += want[i].second.numel();
  }
  CHECK(model.num_parameters() == total);
  CHECK(model.parameters().size() == want.size());
  // parameters() returns the same handles (training updates the model)
  CHECK(model.parameters()[0].same(model.embedding->weight));
  CHECK(got.back().second.same(model.dense->bias));

  // one layer, a different width: the list follows the config
  models::ModelConfig c1 = cfg;
  c1.layers = 1;
  c1.d_model = 4;
  models::SequenceModel m1(c1, 0);
  const auto got1 = m1.named_parameters();
  const auto want1 = tiny::encoder_state_dict(c1);
  REQUIRE(got1.size() == want1.size());
  for (std::size_t i = 0; i < want1.size(); ++i) {
    CHECK(got1[i].first == want1[i].first);
    CHECK(got1[i].second.shape() == want1[i].second);
  }
}

TEST_CASE("SequenceModel: same seed same init, different seed different init") {
  const models::ModelConfig cfg = small_config();
  models::SequenceModel a(cfg, 3), b(cfg, 3), c(cfg, 4);
  const auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].to_vector() == pb[i].to_vector());
  CHECK(pa[0].to_vector() != pc[0].to_vector());
}

TEST_CASE("train()/eval() reach every submodule, including every dropout") {
  models::ModelConfig cfg = small_config();
  cfg.dropout = 0.5;
  models::SequenceModel model(cfg, 0);
  auto all_modes = [&](bool want) {
    CHECK(model.training() == want);
    CHECK(model.embedding->training() == want);
    CHECK(model.pos_encoding->training() == want);
    CHECK(model.pos_encoding->dropout->training() == want);
    CHECK(model.dense->training() == want);
    for (const auto& blk : model.blks) {
      CHECK(blk->training() == want);
      CHECK(blk->attention->training() == want);
      CHECK(blk->attention->attention->training() == want);
      CHECK(blk->attention->attention->dropout->training() == want);
      CHECK(blk->attention->W_q->training() == want);
      CHECK(blk->addnorm1->dropout->training() == want);
      CHECK(blk->addnorm1->ln->training() == want);
      CHECK(blk->ffn->dense1->training() == want);
      CHECK(blk->addnorm2->dropout->training() == want);
    }
  };
  all_modes(true);
  model.eval();
  all_modes(false);
  model.train();
  all_modes(true);
  model.train(false);
  all_modes(false);

  // With dropout 0.5, eval-mode forwards are deterministic and train-mode ones are not.
  Tensor tok = Tensor::from_ints({1, 2, 3, 4, 5, 6, 1, 2, 0, 0}, {2, 5});
  Tensor lens = Tensor::from_ints({5, 3}, {2});
  model.eval();
  const auto e1 = model.forward(tok, lens).to_vector(), e2 = model.forward(tok, lens).to_vector();
  CHECK(e1 == e2);
  model.train();
  CHECK(model.forward(tok, lens).to_vector() != model.forward(tok, lens).to_vector());
}

TEST_CASE("zero_grad drops every parameter's gradient") {
  models::SequenceModel model(small_config(), 0);
  Tensor tok = Tensor::from_ints({1, 2, 3, 4, 5, 6, 1, 2, 0, 0}, {2, 5});
  Tensor logits = model.forward(tok, Tensor::from_ints({5, 3}, {2}));
  ops::sum(logits).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    CAPTURE(name);
    CHECK(p.grad().defined());
    CHECK(p.grad().shape() == p.shape());
  }
  model.zero_grad();
  for (const auto& [name, p] : model.named_parameters()) {
    CAPTURE(name);
    CHECK_FALSE(p.grad().defined());
  }
}

TEST_CASE("restore_parameters: copies values into the existing handles") {
  const models::ModelConfig cfg = small_config();
  models::SequenceModel src(cfg, 1), dst(cfg, 2);
  const Tensor handle = dst.embedding->weight;
  // values given in another order and as float64: converted and matched by name
  nn::NamedTensors vals;
  const auto sp = src.named_parameters();
  for (auto it = sp.rbegin(); it != sp.rend(); ++it) vals.emplace_back(it->first, it->second.to(DType::f64));
  io::restore_parameters(dst, vals, "src.st");
  CHECK(dst.embedding->weight.same(handle));
  const auto dp = dst.named_parameters();
  for (std::size_t i = 0; i < sp.size(); ++i) {
    CHECK(dp[i].second.dtype() == DType::f32);
    CHECK(dp[i].second.to_vector() == sp[i].second.to_vector());
  }
  // and the model computes the same thing afterwards
  Tensor tok = Tensor::from_ints({1, 2, 3, 4, 5, 6, 1, 2, 0, 0}, {2, 5});
  Tensor lens = Tensor::from_ints({5, 3}, {2});
  CHECK(src.forward(tok, lens).to_vector() == dst.forward(tok, lens).to_vector());
}

TEST_CASE("restore_parameters refusals name the source and the parameter, and change nothing") {
  const models::ModelConfig cfg = small_config();
  models::SequenceModel src(cfg, 1), dst(cfg, 2);
  auto snapshot = [&] {
    std::vector<std::vector<double>> s;
    for (const auto& t : dst.parameters()) s.push_back(t.to_vector());
    return s;
  };
  const auto before = snapshot();
  nn::NamedTensors vals = src.named_parameters(); // differs from dst everywhere
  auto refused = [&](const nn::NamedTensors& v) {
    const std::string msg = error_of<std::invalid_argument>([&] { io::restore_parameters(dst, v, "ckpt.st"); });
    CHECK(msg.rfind("ckpt.st: ", 0) == 0);
    CHECK(snapshot() == before);
    return msg;
  };

  struct Case {
    const char* what;
    std::function<void(nn::NamedTensors&)> change; // of a copy of vals
    std::vector<std::string> said;                  // parts of the message
  };
  const Case cases[] = {
      {"missing", [](nn::NamedTensors& v) { v.pop_back(); }, {"missing", "'dense.bias'", "[7]"}}, // no dense.bias
      {"extra", [](nn::NamedTensors& v) { v.emplace_back("blks.2.ffn.dense1.weight", Tensor::zeros({12, 8})); },
       {"unexpected", "'blks.2.ffn.dense1.weight'"}},
      {"wrong shape (the last parameter, after every other was fine)",
       [](nn::NamedTensors& v) { v.back().second = Tensor::zeros({8}); }, {"'dense.bias'", "[8]", "[7]"}},
      {"wrong shape in the middle", [](nn::NamedTensors& v) { v[5].second = Tensor::zeros({8, 9}); },
       {"'" + vals[5].first + "'"}},
      {"a name given twice", [&](nn::NamedTensors& v) { v.push_back(vals[3]); }, {"'" + vals[3].first + "'", "twice"}},
      {"integer values", [](nn::NamedTensors& v) { v.back().second = Tensor::from_ints({1, 2, 3, 4, 5, 6, 7}, {7}); },
       {"'dense.bias'", "dtype"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    nn::NamedTensors v = vals;
    c.change(v);
    const std::string msg = refused(v);
    for (const std::string& part : c.said) CHECK(contains(msg, part));
  }
}

TEST_CASE("Sequential: PyTorch's parameter names and the composed forward") {
  Generator g(5);
  auto first = std::make_shared<nn::Linear>(4, 6, true, g);
  auto last = std::make_shared<nn::Linear>(6, 3, false, g);
  nn::Sequential seq(first, std::make_shared<nn::GELU>(), nn::Sequential::Step(ops::relu), last);
  CHECK(seq.size() == 4);
  std::vector<std::string> names;
  for (const auto& [name, p] : seq.named_parameters()) names.push_back(name);
  // nn.Sequential(Linear, GELU, ReLU, Linear(bias=False)).state_dict() keys
  CHECK(names == std::vector<std::string>{"0.weight", "0.bias", "3.weight"});
  const Tensor x = randn({2, 5, 4}, 6, DType::f32);
  const Tensor want = last->forward(ops::relu(ops::gelu(first->forward(x))));
  CHECK(seq.forward(x).to_vector() == want.to_vector());
  // empty: the identity, as torch.nn.Sequential()
  nn::Sequential empty;
  CHECK(empty.forward(x).same(x));
  CHECK(contains(error_of<std::invalid_argument>([&] { seq.forward(Tensor()); }), "Sequential::forward"));
  CHECK(contains(error_of<std::invalid_argument>([&] { seq.add(std::shared_ptr<nn::ReLU>()); }), "Sequential::add"));
  // gradients reach every parameter through the steps
  ops::sum(seq.forward(x)).backward();
  for (const auto& [name, p] : seq.named_parameters()) CHECK_MESSAGE(p.grad().defined(), name);
}

TEST_CASE("Module::to converts every parameter in place and keeps the handles") {
  Generator g(7);
  auto lin = std::make_shared<nn::Linear>(3, 2, true, g);
  nn::Sequential seq(lin, std::make_shared<nn::LayerNorm>(2));
  const Tensor held = lin->weight; // a handle taken before the conversion
  const std::vector<double> before = held.to_vector();
  ops::sum(seq.forward(randn({4, 3}, 8, DType::f32))).backward();
  REQUIRE(held.grad().defined());
  CHECK(&seq.to(DType::f64) == &seq);
  for (const auto& [name, p] : seq.named_parameters()) {
    INFO(name);
    CHECK(p.dtype() == DType::f64);
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
    CHECK_FALSE(p.grad().defined()); // dropped: it had the old dtype
  }
  CHECK(held.dtype() == DType::f64);
  CHECK(held.to_vector() == before); // float32 values are exact in float64
  CHECK(held.same(lin->weight));
  // the converted module runs in float64 and its gradients are float64
  const Tensor y = seq.forward(randn({4, 3}, 8, DType::f64));
  CHECK(y.dtype() == DType::f64);
  ops::sum(y).backward();
  CHECK(held.grad().dtype() == DType::f64);
  // and back: float64 -> float32 rounds
  seq.to(DType::f32);
  CHECK(held.dtype() == DType::f32);
  CHECK(contains(error_of<std::invalid_argument>([&] { seq.to(DType::i64); }), "Module::to"));
}

TEST_CASE("gradcheck reports name a module's parameters") {
  Generator g(9);
  nn::Sequential seq(std::make_shared<nn::Linear>(3, 2, true, g));
  seq.to(DType::f64);
  const Tensor x = randn({2, 3}, 10);
  const GradcheckResult r = gradcheck_leaves([&] { return seq.forward(x); }, seq.named_parameters());
  CHECK(r.ok);
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0].name == "0.weight");
  CHECK(r.inputs[1].name == "0.bias");
  CHECK(contains(r.summary(), "0.weight [2, 3]: max abs err"));
  // unnamed leaves keep their positions as names
  Tensor leaf = randn({2}, 11).set_requires_grad();
  const GradcheckResult unnamed = gradcheck_leaves([&] { return ops::tanh(leaf); }, std::vector<Tensor>{leaf});
  CHECK(unnamed.inputs[0].name == "input 0");
}

namespace {
// A module of modules, as a user writes one: own parameter, children, a grandchild.
class TwoLayer : public nn::Module {
public:
  explicit TwoLayer(Generator& gen) {
    scale = register_parameter("scale", Tensor::ones({3}));
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2, true, gen));
    head = register_module("head", std::make_shared<nn::Sequential>());
    head->add(std::make_shared<nn::Linear>(2, 1, false, gen));
    head->add([](const Tensor& t) { return ops::relu(t); });
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.1, 1));
  }
  Tensor scale;
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::Sequential> head;
  std::shared_ptr<nn::Dropout> drop;
};
} // namespace

TEST_CASE("summary(model) and operator<<: the module tree with each module's type, shapes and parameter counts") {
  Generator gen(1);
  TwoLayer m(gen);
  const std::string want = "TwoLayer: 13 parameters\n"
                           "  scale [3]\n"
                           "  (fc) Linear: 8 parameters\n"
                           "    weight [2, 3]\n"
                           "    bias [2]\n"
                           "  (head) Sequential: 2 parameters\n"
                           "    (0) Linear: 2 parameters\n"
                           "      weight [1, 2]\n"
                           "  (drop) Dropout: 0 parameters\n";
  CHECK(nn::summary(m) == want);
  std::ostringstream os;
  os << m;
  CHECK(os.str() == want);
  CHECK(m.num_parameters() == 13);
}

TEST_CASE("parameters() is accepted where named_parameters() is: an optimizer names them by position") {
  Generator gen_a(2), gen_b(2);
  nn::Linear a(3, 2, true, gen_a), b(3, 2, true, gen_b); // the same values
  optim::SGD by_name(a.named_parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD by_position(b.parameters(), {.lr = 0.1, .momentum = 0.9});
  CHECK(by_name.params()[1].first == "bias");
  CHECK(by_position.params()[1].first == "1");
  const Tensor x = Tensor::normal({4, 3}, 0, 1, gen_a);
  for (int step = 0; step < 2; ++step)
    for (const auto& [m, opt] : {std::pair<nn::Linear*, optim::SGD*>{&a, &by_name}, {&b, &by_position}}) {
      opt->zero_grad();
      ops::sum(m->forward(x) * m->forward(x)).backward();
      opt->step();
    }
  CHECK(a.weight.to_vector() == b.weight.to_vector());
  CHECK(a.bias.to_vector() == b.bias.to_vector());
  CHECK(by_position.state().size() == by_name.state().size());
}
