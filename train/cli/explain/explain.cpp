#include "train/cli/explain/explain.hpp"

#include <cmath>
#include <fmt/format.h>
#include <fstream>

#include "framework/autograd.hpp"
#include "framework/gradcheck.hpp"
#include "framework/io/safetensors.hpp"
#include "framework/ops/nn_ops.hpp"
#include "framework/ops/ops.hpp"
#include "framework/random.hpp"
#include "models/attention.hpp"
#include "train/heatmap_svg.hpp"

namespace headgrad::cli::explain {
namespace {

constexpr DType f64 = DType::f64;

class Printer {
public:
  explicit Printer(int precision) : precision_(precision) {}
  void line(const std::string& s = "") { out += s + "\n"; }
  void heading(const std::string& s) { out += "\n== " + s + " ==\n"; }
  // name, shape, then the values: a 3-D tensor as one matrix block per leading index.
  void tensor(const std::string& name, const Tensor& t, const std::string& note = "") {
    out += fmt::format("{} {}{}\n", name, t.shape(), note.empty() ? "" : "  " + note);
    const auto v = t.to_vector();
    if (t.dim() == 0) {
      out += fmt::format("  {:.{}f}\n", v[0], precision_);
      return;
    }
    const std::int64_t cols = t.shape().back();
    const std::int64_t rows = t.dim() >= 2 ? t.shape()[t.dim() - 2] : 1;
    const std::int64_t blocks = cols * rows == 0 ? 0 : t.numel() / (cols * rows);
    for (std::int64_t b = 0; b < blocks; ++b) {
      if (blocks > 1) out += fmt::format("  [{}]\n", b);
      for (std::int64_t i = 0; i < rows; ++i) {
        out += "   ";
        for (std::int64_t j = 0; j < cols; ++j)
          out += fmt::format(" {:>{}.{}f}", v[static_cast<std::size_t>((b * rows + i) * cols + j)], precision_ + 4,
                             precision_);
        out += "\n";
      }
    }
  }
  std::string out;

private:
  int precision_;
};

// A fresh leaf holding t's values: the start of the next stage.
Tensor leaf_of(const Tensor& t) {
  Tensor l = t.detach().contiguous(); // shares t's values, no history
  l.set_requires_grad(true);
  return l;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

} // namespace

ExplainResult run(const ExplainOptions& o) {
  if (o.precision < 0 || o.precision > 12)
    throw std::invalid_argument(fmt::format("--precision must be in [0, 12], got {}", o.precision));
  std::int64_t B = o.batch, Tq = o.queries, Tk = o.keys, h = o.hidden, H = o.heads;
  std::int64_t q_size = h, k_size = h, v_size = h;
  io::SafetensorsFile fx;
  if (!o.fixture.empty()) {
    fx = io::load_safetensors(o.fixture);
    const Dims qs = fx.at("queries").shape(), ks = fx.at("keys").shape(), vs = fx.at("values").shape();
    if (qs.size() != 3 || ks.size() != 3 || vs.size() != 3)
      throw std::invalid_argument(fmt::format("{}: queries/keys/values must be 3-D", o.fixture));
    B = qs[0];
    Tq = qs[1];
    q_size = qs[2];
    Tk = ks[1];
    k_size = ks[2];
    v_size = vs[2];
    h = fx.at("W_o.weight").shape()[0];
    auto it = fx.metadata.find("num_heads");
    if (it == fx.metadata.end()) throw std::invalid_argument(fmt::format("{}: metadata lacks num_heads", o.fixture));
    H = std::stoll(it->second);
  }
  auto positive = [](std::int64_t v, const char* flag) {
    if (v < 1) throw std::invalid_argument(fmt::format("--{} must be at least 1, got {}", flag, v));
  };
  positive(B, "batch");
  positive(Tq, "queries");
  positive(Tk, "keys");
  positive(h, "hidden");
  positive(H, "heads");
  if (h % H != 0) throw std::invalid_argument(fmt::format("--hidden ({}) must be divisible by --heads ({})", h, H));
  if (o.fixture.empty() && (o.valid_len < 0 || o.valid_len > Tk))
    throw std::invalid_argument(fmt::format("--valid-len must be in [0, --keys = {}], got {}", Tk, o.valid_len));
  const std::int64_t d = h / H;

  Generator gen(o.seed);
  models::MultiHeadAttention mha(k_size, q_size, v_size, h, H, 0.0, false, gen, f64); // d2l signature, no bias
  Tensor queries, keys, values, valid_lens, R; // R: the upstream gradient dL/d(output)
  if (o.fixture.empty()) {
    queries = Tensor::normal({B, Tq, h}, 0, 1, gen, f64);
    keys = Tensor::normal({B, Tk, h}, 0, 1, gen, f64);
    values = Tensor::normal({B, Tk, h}, 0, 1, gen, f64);
    valid_lens = Tensor::from_ints(std::vector<std::int64_t>(static_cast<std::size_t>(B), o.valid_len), {B});
    R = Tensor::normal({B, Tq, h}, 0, 1, gen, f64);
  } else {
    mha.load_parameters({{"W_q.weight", fx.at("W_q.weight")}, {"W_k.weight", fx.at("W_k.weight")},
                         {"W_v.weight", fx.at("W_v.weight")}, {"W_o.weight", fx.at("W_o.weight")}},
                        o.fixture);
    queries = fx.at("queries").to(f64).contiguous();
    keys = fx.at("keys").to(f64).contiguous();
    values = fx.at("values").to(f64).contiguous();
    valid_lens = fx.at("valid_lens");
    R = fx.at("grad_output").to(f64).contiguous();
  }
  queries.set_requires_grad();
  keys.set_requires_grad();
  values.set_requires_grad();
  const std::string lens_text = fmt::format("{}", fmt::join(valid_lens.to_int_vector(), ", "));

  Printer p(o.precision);
  p.line(fmt::format("Multi-head attention, d2l's MultiHeadAttention(key_size={}, query_size={}, value_size={}, "
                     "num_hiddens={}, num_heads={}, dropout=0, bias=false)",
                     k_size, q_size, v_size, h, H));
  p.line(fmt::format("batch {}, {} queries, {} keys, num_hiddens {}, {} heads of d = {}, valid_lens = [{}]; {}", B, Tq,
                     Tk, h, H, d, lens_text,
                     o.fixture.empty() ? fmt::format("random values, seed {}", o.seed) : "values from " + o.fixture));
  p.line("Loss L = sum(output * R) for a fixed random R, so dL/d(output) = R.");

  // ---------------- forward, stage by stage ----------------
  p.heading("forward");
  p.tensor("queries", queries, "(B, Tq, query_size)");
  p.tensor("keys", keys, "(B, Tk, key_size)");
  p.tensor("values", values, "(B, Tk, value_size)");
  p.tensor("W_q.weight", mha.W_q->weight, "(num_hiddens, query_size); y = x W^T");
  p.tensor("W_k.weight", mha.W_k->weight);
  p.tensor("W_v.weight", mha.W_v->weight);
  p.tensor("W_o.weight", mha.W_o->weight);

  // 1. projections
  Tensor Q = mha.W_q->forward(queries), K = mha.W_k->forward(keys), V = mha.W_v->forward(values);
  p.tensor("Q = W_q(queries)", Q, "(B, Tq, num_hiddens)");
  p.tensor("K = W_k(keys)", K, "(B, Tk, num_hiddens)");
  p.tensor("V = W_v(values)", V, "(B, Tk, num_hiddens)");

  // 2. transpose_qkv
  Tensor Q_in = leaf_of(Q), K_in = leaf_of(K), V_in = leaf_of(V);
  Tensor Qh = models::transpose_qkv(Q_in, H), Kh = models::transpose_qkv(K_in, H), Vh = models::transpose_qkv(V_in, H);
  for (std::int64_t hh = 0; hh < H; ++hh)
    p.line(fmt::format("head {} takes columns {}..{} of Q, K and V; batch row b of head {} is row b*{} + {} below", hh,
                       hh * d, hh * d + d - 1, hh, H, hh));
  p.tensor("Q after transpose_qkv", Qh, "(B*H, Tq, d)");
  p.tensor("K after transpose_qkv", Kh, "(B*H, Tk, d)");
  p.tensor("V after transpose_qkv", Vh, "(B*H, Tk, d)");

  // 3. scores
  Tensor Qh_in = leaf_of(Qh), Kh_in = leaf_of(Kh), Vh_in = leaf_of(Vh);
  // the 1/sqrt(d) is matmul's scale (the gemm's alpha), as in DotProductAttention
  Tensor scores = ops::matmul(Qh_in, Kh_in.transpose(1, 2), 1.0 / std::sqrt(static_cast<double>(d)));
  p.tensor("scores = Q K^T / sqrt(d)", scores, fmt::format("(B*H, Tq, Tk), sqrt(d) = {:.4f}", std::sqrt(double(d))));

  // 4. masked softmax
  Tensor lens = models::repeat_interleave(valid_lens, H);
  p.line(fmt::format("valid_lens repeated per head (repeat_interleave): {}", fmt::join(lens.to_int_vector(), ", ")));
  Tensor scores_in = leaf_of(scores);
  Tensor weights = ops::masked_softmax(scores_in, lens);
  p.tensor("weights = masked_softmax(scores, valid_lens)", weights,
           "keys at positions >= valid_len are masked: weight exactly 0");

  // 5. weighted sum per head
  Tensor weights_in = leaf_of(weights);
  Tensor heads_out = ops::matmul(weights_in, Vh_in);
  p.tensor("per-head outputs = weights V", heads_out, "(B*H, Tq, d)");

  // 6. transpose_output
  Tensor heads_in = leaf_of(heads_out);
  Tensor concat = models::transpose_output(heads_in, H);
  p.tensor("transpose_output (heads side by side)", concat, "(B, Tq, num_hiddens)");

  // 7. output projection
  Tensor concat_in = leaf_of(concat);
  Tensor output = mha.W_o->forward(concat_in);
  p.tensor("output = W_o(concat)", output, "(B, Tq, num_hiddens)");

  // ---------------- backward, in reverse ----------------
  p.heading("backward (each stage receives the gradient printed just before it)");
  p.tensor("dL/d output = R", R);
  output.backward(R);
  p.tensor("d concat = dY W_o", concat_in.grad(), "linear backward: dx = dy W");
  p.tensor("d W_o.weight = dY^T concat", mha.W_o->weight.grad(), "summed over batch and queries");
  concat.backward(concat_in.grad());
  p.tensor("d per-head outputs (transpose_output backward = inverse permutation)", heads_in.grad(), "(B*H, Tq, d)");
  heads_out.backward(heads_in.grad());
  p.tensor("d weights = d_out V^T", weights_in.grad(), "(B*H, Tq, Tk)");
  p.tensor("d V (per head) = weights^T d_out", Vh_in.grad(), "(B*H, Tk, d); masked keys get 0");
  weights.backward(weights_in.grad());
  p.tensor("d scores = w * (dw - rowsum(dw * w))", scores_in.grad(), "masked entries: w = 0, so 0");
  scores.backward(scores_in.grad());
  p.tensor("d Q (per head) = d_scores K / sqrt(d)", Qh_in.grad(), "(B*H, Tq, d)");
  p.tensor("d K (per head) = d_scores^T Q / sqrt(d)", Kh_in.grad(), "(B*H, Tk, d)");
  Qh.backward(Qh_in.grad());
  Kh.backward(Kh_in.grad());
  Vh.backward(Vh_in.grad());
  p.tensor("d Q (transpose_qkv backward)", Q_in.grad(), "(B, Tq, num_hiddens)");
  p.tensor("d K", K_in.grad(), "(B, Tk, num_hiddens)");
  p.tensor("d V", V_in.grad(), "(B, Tk, num_hiddens)");
  Q.backward(Q_in.grad());
  K.backward(K_in.grad());
  V.backward(V_in.grad());
  p.tensor("d W_q.weight = dQ^T queries", mha.W_q->weight.grad());
  p.tensor("d W_k.weight = dK^T keys", mha.W_k->weight.grad());
  p.tensor("d W_v.weight = dV^T values", mha.W_v->weight.grad());
  p.tensor("d queries = dQ W_q", queries.grad());
  p.tensor("d keys = dK W_k", keys.grad());
  p.tensor("d values = dV W_v", values.grad());

  // ---------------- checks ----------------
  p.heading("checks");
  ExplainResult res;
  // (a) the staged gradients equal one backward through the whole module
  std::vector<Tensor> staged = {queries.grad(), keys.grad(), values.grad()};
  for (auto& prm : mha.parameters()) staged.push_back(prm.grad());
  std::vector<Tensor> leaves = {queries, keys, values};
  for (auto& prm : mha.parameters()) leaves.push_back(prm);
  for (auto& l : leaves) l.zero_grad();
  mha.forward(queries, keys, values, valid_lens).backward(R);
  double worst = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) worst = std::max(worst, max_abs_diff(staged[i], leaves[i].grad()));
  res.stages_match_full_graph = worst <= 1e-12;
  p.line(fmt::format("stage-by-stage gradients vs one backward through MultiHeadAttention: max abs diff {:.1e} {}",
                     worst, res.stages_match_full_graph ? "(same)" : "(DIFFERENT)"));
  // (b) the gradient check
  const Tensor R_fixed = R;
  const GradcheckResult gc = gradcheck_leaves(
      [&]() { return ops::sum(mha.forward(queries, keys, values, valid_lens) * R_fixed); }, leaves);
  const char* names[] = {"queries", "keys", "values", "W_q.weight", "W_k.weight", "W_v.weight", "W_o.weight"};
  for (std::size_t i = 0; i < gc.inputs.size(); ++i) {
    const auto& r = gc.inputs[i];
    p.line(fmt::format("gradcheck {:<11} {:<12} max abs err {:.2e}  max rel err {:.2e}  {}", names[i], r.shape.str(),
                       r.max_abs_err, r.max_rel_err, r.ok ? "PASS" : "FAIL"));
  }
  res.gradcheck_ok = gc.ok;
  p.line(fmt::format("gradcheck (float64, eps 1e-6, atol 1e-5, rtol 1e-3): {}", gc.ok ? "PASS" : "FAIL"));

  if (!o.svg.empty()) {
    train::HeatmapGrid grid;
    grid.title = fmt::format("multi-head attention, batch row 0: {} heads of d = {}, valid_lens [{}]", H, d, lens_text);
    grid.signed_values = true;
    grid.col_titles = {"Q (Tq x num_hiddens)", "K (Tk x num_hiddens)"};
    grid.row_titles.push_back("projections");
    grid.maps.push_back({Q.slice(0, 0, 1).reshape({Tq, h}), K.slice(0, 0, 1).reshape({Tk, h})});
    // rows of transpose_qkv's output for batch row 0 are 0*H + hh
    for (std::int64_t hh = 0; hh < H; ++hh) {
      grid.row_titles.push_back(fmt::format("head {} (cols {}..{})", hh, hh * d, hh * d + d - 1));
      grid.maps.push_back({Qh.slice(0, hh, hh + 1).reshape({Tq, d}), Kh.slice(0, hh, hh + 1).reshape({Tk, d}),
                           weights.slice(0, hh, hh + 1).reshape({Tq, Tk}), heads_out.slice(0, hh, hh + 1).reshape({Tq, d})});
    }
    grid.col_titles = {"Q / Q head", "K / K head", "weights (Tq x Tk)", "head output"};
    grid.row_titles.push_back("output");
    grid.maps.push_back({concat.slice(0, 0, 1).reshape({Tq, h}), output.slice(0, 0, 1).reshape({Tq, h})});
    const std::string tmp = o.svg + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << train::render_heatmaps_svg(grid);
      if (!f) throw std::invalid_argument(fmt::format("--svg {}: cannot write", o.svg));
    }
    if (std::rename(tmp.c_str(), o.svg.c_str()) != 0)
      throw std::invalid_argument(fmt::format("--svg {}: cannot write", o.svg));
    p.line(fmt::format("wrote {}", o.svg));
  }
  res.tensors = {{"output", output.detach()},
                 {"attention_weights", weights.detach().reshape({B, H, Tq, Tk})},
                 {"grad.queries", staged[0]},
                 {"grad.keys", staged[1]},
                 {"grad.values", staged[2]},
                 {"grad.W_q.weight", staged[3]},
                 {"grad.W_k.weight", staged[4]},
                 {"grad.W_v.weight", staged[5]},
                 {"grad.W_o.weight", staged[6]}};
  res.text = std::move(p.out);
  return res;
}

} // namespace headgrad::cli::explain
