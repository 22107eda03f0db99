#include "train/cli/explain/explain.hpp"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "framework/gradcheck.hpp"
#include "framework/graph_dot.hpp"
#include "framework/ops/ops.hpp"
#include "train/cli/explain/example.hpp"
#include "train/cli/explain/explain_svg.hpp"
#include "train/cli/explain/stages.hpp"
#include "train/cli/explain/tensor_printer.hpp"
#include "train/graph_files.hpp"

namespace headgrad::cli::explain {
namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

void print_header(const Example& e, TensorPrinter& p) {
  p.line(fmt::format("Multi-head attention, d2l's MultiHeadAttention(key_size={}, query_size={}, value_size={}, "
                     "num_hiddens={}, num_heads={}, dropout=0, bias={})",
                     e.k_size, e.q_size, e.v_size, e.h, e.H, e.mha->W_q->bias.defined()));
  p.line(fmt::format("batch {}, {} queries, {} keys, num_hiddens {}, {} heads of d = {}, valid_lens = [{}]; {}", e.B,
                     e.Tq, e.Tk, e.h, e.H, e.d, fmt::join(e.valid_lens.to_int_vector(), ", "), e.source));
  p.line("Loss L = sum(output * R) for a fixed random R, so dL/d(output) = R.");
}

// The example's inputs, then its parameters (W_q.weight, [W_q.bias,] ... W_o.weight), by name.
NamedTensors inputs_of(const Example& e) { return {{"queries", e.queries}, {"keys", e.keys}, {"values", e.values}}; }
NamedTensors named_leaves_of(const Example& e) {
  NamedTensors leaves = inputs_of(e);
  for (auto& named : e.mha->named_parameters()) leaves.push_back(named);
  return leaves;
}
std::vector<Tensor> leaves_of(const Example& e) {
  std::vector<Tensor> leaves;
  for (auto& [name, t] : named_leaves_of(e)) leaves.push_back(t);
  return leaves;
}

// (a) the staged gradients equal one backward through the whole module; returns the staged ones.
std::vector<Tensor> check_against_full_graph(const Example& e, TensorPrinter& p, ExplainResult& res) {
  std::vector<Tensor> leaves = leaves_of(e), staged;
  for (auto& l : leaves) staged.push_back(l.grad());
  for (auto& l : leaves) l.zero_grad();
  e.mha->forward(e.queries, e.keys, e.values, e.valid_lens).backward(e.R);
  double worst = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) worst = std::max(worst, max_abs_diff(staged[i], leaves[i].grad()));
  res.stages_match_full_graph = worst <= 1e-12;
  p.line(fmt::format("stage-by-stage gradients vs one backward through MultiHeadAttention: max abs diff {:.1e} {}",
                     worst, res.stages_match_full_graph ? "(same)" : "(DIFFERENT)"));
  return staged;
}

// (b) the float64 gradient check of L = sum(output * R) w.r.t. every input and weight.
void gradient_check(const Example& e, TensorPrinter& p, ExplainResult& res) {
  const GradcheckResult gc = gradcheck_leaves(
      [&]() { return ops::sum(e.mha->forward(e.queries, e.keys, e.values, e.valid_lens) * e.R); }, leaves_of(e));
  const NamedTensors names = named_leaves_of(e);
  for (std::size_t i = 0; i < gc.inputs.size(); ++i) {
    const auto& r = gc.inputs[i];
    p.line(fmt::format("gradcheck {:<11} {:<12} max abs err {:.2e}  max rel err {:.2e}  {}", names[i].first,
                       r.shape.str(), r.max_abs_err, r.max_rel_err, r.ok ? "PASS" : "FAIL"));
  }
  res.gradcheck_ok = gc.ok;
  p.line(fmt::format("gradcheck (float64, eps 1e-6, atol 1e-5, rtol 1e-3): {}", gc.ok ? "PASS" : "FAIL"));
}

// The autograd graph of one backward through the whole module from R, with every gradient norm
// (leaf gradients zeroed first, so theirs are this backward's alone).
std::string draw_graph(const Example& e, const std::string& path) {
  for (auto& l : leaves_of(e)) l.zero_grad();
  const Tensor output = e.mha->forward(e.queries, e.keys, e.values, e.valid_lens);
  const Graph g = backward_with_graph(output, e.R, {e.mha->named_parameters(), inputs_of(e)});
  const std::string title = fmt::format("d2l's MultiHeadAttention ({} heads, num_hiddens {}), backward from dL/d output "
                                        "= R; each node: op, shape, norm of its gradient",
                                        e.H, e.h);
  try {
    return train::write_graph_files(path, g, title);
  } catch (const std::runtime_error&) {
    throw std::invalid_argument(fmt::format("--graph {}: cannot write", path));
  }
}

} // namespace

ExplainResult run(const ExplainOptions& o) {
  const Example e = make_example(o);
  TensorPrinter p(o.precision);
  print_header(e, p);
  Stages s = forward_stages(e, p);
  backward_stages(e, s, p);

  p.heading("checks");
  ExplainResult res;
  const std::vector<Tensor> staged = check_against_full_graph(e, p, res);
  gradient_check(e, p, res);
  if (!o.svg.empty()) {
    write_explain_svg(o.svg, e, s);
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
