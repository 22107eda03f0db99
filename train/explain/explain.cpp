#include "train/explain/explain.hpp"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "framework/core/gradcheck.hpp"
#include "framework/io/graph_dot.hpp"
#include "framework/ops/ops.hpp"
#include "train/explain/example.hpp"
#include "train/explain/explain_svg.hpp"
#include "train/explain/fused_view.hpp"
#include "train/explain/layer_norm.hpp"
#include "train/explain/named_forward.hpp"
#include "train/explain/stages.hpp"
#include "train/explain/tensor_printer.hpp"
#include "train/pictures/graph_files.hpp"

namespace headgrad::cli::explain {
namespace {

std::string loss_text(const Example& e) {
  return e.cross_entropy ? "L = cross_entropy(Y, targets, mask): Y are the logits, one class per hidden unit"
                         : "L = sum(Y * R) for a fixed random R, so dL/dY = R";
}

void print_header(const Example& e, TensorPrinter& p) {
  p.line(fmt::format("Multi-head attention, d2l's MultiHeadAttention(key_size={}, query_size={}, value_size={}, "
                     "num_hiddens={}, num_heads={}, dropout={}, bias={}){}",
                     e.k_size, e.q_size, e.v_size, e.h, e.H, e.p, e.mha->W_q->bias.defined(),
                     e.self_attention ? ", as self-attention: queries = keys = values = X" : ""));
  p.line(fmt::format("batch {}, {} queries, {} keys, num_hiddens {}, {} heads of d = {}, valid_lens = [{}]{}; {}", e.B,
                     e.Tq, e.Tk, e.h, e.H, e.d, fmt::join(e.valid_lens.to_int_vector(), ", "),
                     e.causal ? " (per query, causal)" : "", e.source));
  p.line(fmt::format("Loss {}.", loss_text(e)));
}

// The example's inputs, then its parameters (W_q.weight, [W_q.bias,] ... W_o.weight), by name.
NamedTensors named_leaves_of(const Example& e) {
  NamedTensors leaves = e.inputs();
  for (auto& named : e.mha->named_parameters()) leaves.push_back(named);
  return leaves;
}
std::vector<Tensor> leaves_of(const Example& e) {
  std::vector<Tensor> leaves;
  for (auto& [name, t] : named_leaves_of(e)) leaves.push_back(t);
  return leaves;
}

// The loss as one graph: through d2l's module itself, or, with dropout, through the same ops with
// the example's fixed mask (the module's Dropout would draw its own).
Tensor one_graph_loss(const Example& e) {
  if (e.p > 0) return named_forward(e).loss;
  return e.loss(e.mha->forward(e.queries, e.keys, e.values, e.valid_lens));
}

// (a) the staged gradients equal one backward through the whole module; returns the staged ones.
std::vector<Tensor> check_against_full_graph(const Example& e, TensorPrinter& p, ExplainResult& res) {
  std::vector<Tensor> leaves = leaves_of(e), staged;
  for (auto& l : leaves) staged.push_back(l.grad());
  for (auto& l : leaves) l.zero_grad();
  one_graph_loss(e).backward();
  double worst = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) worst = std::max(worst, max_abs_diff(staged[i], leaves[i].grad()));
  res.stages_match_full_graph = worst <= 1e-12;
  p.line(fmt::format("stage-by-stage gradients vs one backward through {}: max abs diff {:.1e} {}",
                     e.p > 0 ? "d2l's ops with the same dropout mask" : "MultiHeadAttention", worst,
                     res.stages_match_full_graph ? "(same)" : "(DIFFERENT)"));
  return staged;
}

// (b) the float64 gradient check of L w.r.t. every input and weight.
void gradient_check(const Example& e, TensorPrinter& p, ExplainResult& res) {
  const GradcheckResult gc = gradcheck_leaves([&]() { return one_graph_loss(e); }, leaves_of(e));
  const NamedTensors names = named_leaves_of(e);
  for (std::size_t i = 0; i < gc.inputs.size(); ++i) {
    const auto& r = gc.inputs[i];
    p.line(fmt::format("gradcheck {:<11} {:<12} max abs err {:.2e}  max rel err {:.2e}  {}", names[i].first,
                       r.shape.str(), r.max_abs_err, r.max_rel_err, r.ok ? "PASS" : "FAIL"));
  }
  res.gradcheck_ok = gc.ok;
  p.line(fmt::format("gradcheck (float64, eps 1e-6, atol 1e-5, rtol 1e-3): {}", gc.ok ? "PASS" : "FAIL"));
}

// The autograd graph of one backward through d2l's ops (named_forward: the module's composed path,
// op for op), every node named by what it holds and with its gradient norm; from dL/dY = R at the
// output, or from the cross-entropy loss. Leaf gradients are zeroed first, so theirs are this
// backward's alone.
std::string draw_graph(const Example& e, const std::string& path) {
  for (auto& l : leaves_of(e)) l.zero_grad();
  const NamedForward f = named_forward(e);
  const LeafNames names{e.mha->named_parameters(), e.inputs(), f.results};
  const Graph g = e.cross_entropy ? backward_with_graph(f.loss, names) : backward_with_graph(f.output, e.R, names);
  const std::string title =
      fmt::format("d2l's MultiHeadAttention ({} heads, num_hiddens {}{}), backward from {}; each node: what it holds, "
                  "op, shape, norm of its gradient",
                  e.H, e.h, e.self_attention ? ", self-attention" : "",
                  e.cross_entropy ? "the cross-entropy loss" : "dL/dY = R");
  try {
    return train::write_graph_files(path, g, title);
  } catch (const std::runtime_error&) {
    throw std::invalid_argument(fmt::format("--graph {}: cannot write", path));
  }
}

} // namespace

ExplainResult run(const ExplainOptions& o) {
  if (o.layer_norm) {
    if (o.precision < 0 || o.precision > 12) // (make_example checks it for attention)
      throw std::invalid_argument(fmt::format("--precision must be in [0, 12], got {}", o.precision));
    return run_layer_norm(o);
  }
  const Example e = make_example(o);
  TensorPrinter p(o.precision, o.summary);
  print_header(e, p);
  Stages s = forward_stages(e, p);
  backward_stages(e, s, p);
  ExplainResult res;
  res.fused_match = true;
  if (o.fused) res.fused_match = print_fused_backward(e, s, p) <= 1e-12;

  p.heading("checks");
  const std::vector<Tensor> staged = check_against_full_graph(e, p, res);
  gradient_check(e, p, res);
  if (!o.svg.empty()) {
    write_explain_svg(o.svg, e, s, o.shared_scale);
    p.line(fmt::format("wrote {}", o.svg));
  }
  if (!o.graph.empty()) p.line(draw_graph(e, o.graph));
  res.tensors = {{"output", s.output.detach()},
                 {"attention_weights", s.weights.detach().reshape({e.B, e.H, e.Tq, e.Tk})}};
  const NamedTensors leaves = named_leaves_of(e);
  for (std::size_t i = 0; i < leaves.size(); ++i) res.tensors.emplace_back("grad." + leaves[i].first, staged[i]);
  res.text = p.take();
  return res;
}

} // namespace headgrad::cli::explain
