// The autograd graph drawn (framework/io/graph_dot.hpp): the traced graph is the tape, node for node
// and edge for edge; backward leaves every node's gradient norm in it; the DOT text and the
// `headgrad explain --graph` / `headgrad train --graph` files.
#include <doctest/doctest.h>

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "framework/core/autograd.hpp"
#include "framework/io/graph_dot.hpp"
#include "framework/ops/ops.hpp"
#include "train/explain/example.hpp"
#include "train/explain/named_forward.hpp"
#include "train/pictures/graph_files.hpp"
#include "tests/svg_check.hpp"
#include "tests/test_support.hpp"

using namespace headgrad;
using test_support::contains;
using test_support::count_of;

namespace {

// The tape counted on its own terms: every tensor reachable from root through grad_fn inputs
// that require grad, and every such input slot.
struct TapeCount {
  std::size_t tensors = 0, input_slots = 0;
};
TapeCount count_tape(const Tensor& root) {
  TapeCount c;
  std::unordered_set<const TensorImpl*> seen{root.impl()};
  std::vector<const TensorImpl*> todo{root.impl()};
  while (!todo.empty()) {
    const TensorImpl* t = todo.back();
    todo.pop_back();
    ++c.tensors;
    if (!t->grad_fn) continue;
    for (const auto& in : t->grad_fn->inputs) {
      if (!in || !in->requires_grad) continue;
      ++c.input_slots;
      if (seen.insert(in.get()).second) todo.push_back(in.get());
    }
  }
  return c;
}

double norm_of(const Tensor& t) {
  double s = 0;
  for (double v : t.to_vector()) s += v * v;
  return std::sqrt(s);
}

LeafNames names_of(const cli::explain::Example& e) {
  return {e.mha->named_parameters(), {{"queries", e.queries}, {"keys", e.keys}, {"values", e.values}}};
}

// The DOT label of the first node whose label contains `part`, or "".
std::string label_with(const std::string& dot, const std::string& part) {
  for (const std::string& line : test_support::lines_of(dot)) {
    const auto at = line.find("[label=\"");
    if (at != std::string::npos && contains(line, part)) return line.substr(at + 8, line.find("\", ", at) - at - 8);
  }
  return "";
}

} // namespace

TEST_CASE("graph: the multi-head attention graph has the tape's nodes and edges") {
  const cli::explain::Example e = cli::explain::make_example({});
  const Tensor output = e.mha->forward(e.queries, e.keys, e.values, e.valid_lens);
  const TapeCount tape = count_tape(output);
  const Graph g = trace_graph(output, names_of(e));
  CHECK(g.nodes.size() == tape.tensors);
  CHECK(g.edge_count() == tape.input_slots);
  // d2l's module, op by op: 3 linear, 3 x transpose_qkv (reshape, permute, reshape), the permute of
  // K^T, matmul, masked_softmax, matmul, transpose_output (reshape, permute, reshape), W_o's linear
  // = 20 op outputs; leaves: queries, keys, values and the 4 weights.
  CHECK(tape.tensors == 27);
  CHECK(tape.input_slots == 26);
  // and the DOT text has one node statement per node, one arrow per edge
  const std::string dot = graph_dot(g, "test");
  CHECK(count_of(dot, " [label=") == g.nodes.size());
  CHECK(count_of(dot, " -> ") == g.edge_count());
  std::size_t ops = 0, params = 0, inputs = 0;
  for (const auto& n : g.nodes) {
    ops += n.kind == GraphNodeKind::op;
    params += n.kind == GraphNodeKind::parameter;
    inputs += n.kind == GraphNodeKind::input;
    for (std::size_t in : n.inputs) CHECK(in < static_cast<std::size_t>(&n - g.nodes.data())); // inputs come first
  }
  CHECK(ops == 20);
  CHECK(params == 4);
  CHECK(inputs == 3);
  CHECK(g.nodes.back().op == "linear"); // the root: W_o
}

TEST_CASE("graph: a tensor read twice gives two edges and the summed gradient") {
  Tensor x = test_support::randn({3}, 1).set_requires_grad();
  const Tensor y = ops::sum(x * x);
  const TapeCount tape = count_tape(y);
  const Graph g = backward_with_graph(y, {{}, {{"x", x}}});
  REQUIRE(g.nodes.size() == tape.tensors); // x, mul, then sum's nodes
  CHECK(g.edge_count() == tape.input_slots);
  CHECK(g.nodes[0].name == "x");
  CHECK(g.nodes[1].op == "mul");
  CHECK(g.nodes[1].inputs == std::vector<std::size_t>{0, 0});
  REQUIRE(g.nodes[0].grad_norm.has_value());
  CHECK(*g.nodes[0].grad_norm == doctest::Approx(2 * norm_of(x))); // d/dx sum(x^2) = 2x
}

TEST_CASE("graph: backward records every node's gradient norm, the ones backward then drops too") {
  const cli::explain::Example e = cli::explain::make_example({});
  const Tensor output = e.mha->forward(e.queries, e.keys, e.values, e.valid_lens);
  const Graph g = backward_with_graph(output, e.R, names_of(e));
  for (const auto& n : g.nodes) {
    INFO(n.op << n.name);
    REQUIRE(n.grad_norm.has_value());
    CHECK(std::isfinite(*n.grad_norm));
  }
  CHECK(*g.nodes.back().grad_norm == doctest::Approx(norm_of(e.R))); // the root's gradient is R
  std::unordered_map<std::string, double> leaf_norm;
  for (const auto& n : g.nodes)
    if (n.kind != GraphNodeKind::op) leaf_norm[n.name] = *n.grad_norm;
  CHECK(leaf_norm.at("queries") == doctest::Approx(norm_of(e.queries.grad())).epsilon(1e-12));
  CHECK(leaf_norm.at("W_k.weight") == doctest::Approx(norm_of(e.mha->W_k->weight.grad())).epsilon(1e-12));
  // the label says so
  const std::string dot = graph_dot(g, "t");
  CHECK(contains(dot, "W_k.weight\\n[4, 4]\\ngrad norm "));
  CHECK(contains(dot, "shape=box, style=filled, fillcolor=\"#cfe2f3\"")); // a parameter
  CHECK(contains(dot, "queries\\n[1, 3, 4]"));
  CHECK(count_of(dot, "peripheries=2") == 1); // the root
}

TEST_CASE("ObserveGradients: each tensor once, readers before what they read, only while alive") {
  Tensor x = test_support::randn({3}, 3).set_requires_grad();
  const Tensor h = x * 3.0;
  const Tensor y = ops::sum(h * h);
  const std::size_t tensors = count_tape(y).tensors; // before backward frees the graph
  std::vector<const TensorImpl*> seen;
  std::vector<double> h_grad;
  {
    ObserveGradients watch([&](const TensorImpl& t, const Tensor& g) {
      seen.push_back(&t);
      if (&t == h.impl()) h_grad = g.to_vector(); // a non-leaf gradient, dropped right after
    });
    y.backward();
  }
  CHECK(seen.size() == tensors);
  CHECK(seen.front() == y.impl());
  CHECK(seen.back() == x.impl());
  CHECK(std::unordered_set<const TensorImpl*>(seen.begin(), seen.end()).size() == seen.size());
  test_support::check_close(h_grad, (h * 2.0).to_vector()); // d/dh sum(h^2) = 2h
  CHECK_FALSE(h.grad().defined());
  // the observer is gone with its guard
  const std::size_t before = seen.size();
  ops::sum(x * 2.0).backward();
  CHECK(seen.size() == before);
}

TEST_CASE("graph: a freed graph or a tensor without one is refused") {
  Tensor x = test_support::randn({2}, 2).set_requires_grad();
  const Tensor y = ops::sum(x * 2.0);
  y.backward();
  CHECK(contains(test_support::error_of<std::logic_error>([&] { (void)trace_graph(y, {}); }), "freed"));
  CHECK(contains(test_support::error_of<std::logic_error>([&] { (void)trace_graph(Tensor::ones({2}), {}); }),
                 "does not require grad"));
}

TEST_CASE("headgrad explain --graph writes DOT and, with Graphviz, an SVG that parses") {
  test_support::TempDir dir("test_graph_dot");
  const test_support::CliRun r = test_support::run_cli({"explain", "--graph", "mha.dot"}, dir.path);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  const std::string dot = test_support::read_file(dir / "mha.dot");
  CHECK(test_support::starts_with(dot, "digraph autograd {"));
  CHECK(count_of(dot, " [label=") == 27);
  CHECK(count_of(dot, " -> ") == 26);
  if (train::find_on_path("dot").empty()) {
    MESSAGE("Graphviz's dot is not installed: the SVG is not checked");
    CHECK(contains(r.out, "apt-get install graphviz"));
  } else {
    CHECK(contains(r.out, "wrote mha.dot and mha.svg (27 nodes, 26 edges)"));
    const std::string svg = test_support::read_file(dir / "mha.svg");
    CHECK(svg_check::well_formed(svg) == "");
    CHECK(contains(svg, "W_o.weight"));
  }
  // without dot on PATH: the DOT file and a one-line hint
  const test_support::CliRun hint =
      test_support::run_cli({"explain", "--graph", "again.svg"}, dir.path, {{"PATH", dir.path.string()}});
  CHECK(hint.rc == 0);
  CHECK(test_support::fs::exists(dir / "again.dot"));
  CHECK_FALSE(test_support::fs::exists(dir / "again.svg"));
  CHECK(count_of(hint.out, "no SVG: Graphviz's dot is not installed (Debian: apt-get install graphviz") == 1);
}

TEST_CASE("headgrad train --graph draws one training step of the model") {
  test_support::TempDir dir("test_graph_dot");
  const test_support::CliRun r = test_support::run_cli(
      {"train", "--task", "copy", "--batch", "4", "--d-model", "8", "--heads", "2", "--layers", "1", "--ffn", "16",
       "--max-len", "6", "--min-len", "2", "--vocab", "8", "--steps", "1", "--threads", "1",
       "--graph", "step.dot", "--out", "run"},
      dir.path);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  const std::string dot = test_support::read_file(dir / "step.dot");
  // every parameter of the model is a leaf, named as in the checkpoint; the root is the loss
  for (const char* p : {"embedding.weight", "blks.0.attention.W_q.weight", "blks.0.addnorm1.ln.weight",
                        "blks.0.ffn.dense1.bias", "dense.weight"})
    CHECK(contains(dot, std::string("label=\"") + p + "\\n"));
  // the root, a scalar, shows its value and its gradient 1 (micrograd's data and grad)
  CHECK(contains(dot, "label=\"cross_entropy\\n[]\\ngrad norm 1\\ndata ["));
  CHECK(contains(dot, "]\\ngrad [1]\", shape=ellipse, peripheries=2"));
  CHECK(contains(r.out, "wrote step.dot"));
}

TEST_CASE("graph: tensors of at most 8 elements show their data and grad, as micrograd's draw_dot") {
  Tensor x = Tensor::from({1.0, -2.0, 0.5}, {3}, DType::f64).set_requires_grad();
  Tensor big = test_support::randn({3, 3}, 4).set_requires_grad(); // 9 elements: norms only
  const Tensor y = ops::sum(x * x) + ops::sum(big);
  const Graph g = backward_with_graph(y, {{}, {{"x", x}, {"big", big}}});
  const std::string dot = graph_dot(g, "t");
  CHECK(contains(dot, "label=\"x\\n[3]\\ngrad norm 4.58\\ndata [1, -2, 0.5]\\ngrad [2, -4, 1]\""));
  const std::string b = label_with(dot, "big\\n");
  CHECK(contains(b, "grad norm"));
  CHECK_FALSE(contains(b, "data"));
  CHECK_FALSE(contains(b, "grad ["));
  REQUIRE(g.nodes[0].data.size() == 3);
  CHECK(g.nodes[0].grad == std::vector<double>{2, -4, 1});
}

TEST_CASE("graph: explain's forward is the module's graph op for op, every op output named by what it holds") {
  const cli::explain::Example e = cli::explain::make_example({});
  const Tensor module_output = e.mha->forward(e.queries, e.keys, e.values, e.valid_lens);
  const cli::explain::NamedForward f = cli::explain::named_forward(e);
  test_support::check_close(f.output, module_output.to_vector(), 0.0, 0.0); // bit for bit
  const LeafNames names{e.mha->named_parameters(), e.inputs(), f.results};
  const Graph ours = trace_graph(f.output, names), module = trace_graph(module_output, names_of(e));
  REQUIRE(ours.nodes.size() == module.nodes.size());
  for (std::size_t i = 0; i < ours.nodes.size(); ++i) {
    CAPTURE(i);
    CHECK(ours.nodes[i].op == module.nodes[i].op);
    CHECK(ours.nodes[i].shape == module.nodes[i].shape);
    CHECK(ours.nodes[i].inputs == module.nodes[i].inputs);
    if (ours.nodes[i].kind == GraphNodeKind::op) CHECK_FALSE(ours.nodes[i].name.empty()); // all named
  }
  const std::string dot = graph_dot(ours, "t");
  // the name first, then the op and shape; the scaled matmul carries its scale
  CHECK(contains(dot, "label=\"scores S = s Qh Kh^T, s = 1/sqrt(2) = 0.7071\\nmatmul [2, 3, 4]\""));
  CHECK(contains(dot, "label=\"weights P = masked_softmax(S)\\nmasked_softmax [2, 3, 4]\""));
  CHECK(contains(dot, "label=\"Qh = transpose_qkv(Q) (B*H, T, d)\\nreshape [2, 3, 2]\""));
  CHECK(contains(dot, "label=\"Y = W_o(C), the output\\nlinear [1, 3, 4]\""));
}

TEST_CASE("headgrad explain --graph: cross-entropy ends in the loss, dropout adds its node, self-attention has one X") {
  test_support::TempDir dir("test_graph_dot");
  const test_support::CliRun r = test_support::run_cli(
      {"explain", "--graph", "ce.dot", "--loss", "cross-entropy", "--dropout", "0.25", "--self-attention"}, dir.path);
  INFO("stdout: ", r.out, "\nstderr: ", r.err);
  REQUIRE(r.rc == 0);
  const std::string dot = test_support::read_file(dir / "ce.dot");
  // 27 nodes, less two input leaves (one X), plus the dropout and the loss: 27; edges: 26 + 2
  CHECK(count_of(dot, " [label=") == 27);
  CHECK(count_of(dot, " -> ") == 28);
  CHECK(contains(dot, "label=\"A = dropout(P): P * mask / (1 - 0.25)\\ndropout [2, 4, 4]"));
  CHECK(contains(dot, "label=\"L = cross_entropy(Y, targets, mask)\\ncross_entropy []\\ngrad norm 1\\ndata ["));
  CHECK(contains(dot, "label=\"X\\n[1, 4, 4]"));
  CHECK(contains(dot, "backward from the cross-entropy loss"));
}
