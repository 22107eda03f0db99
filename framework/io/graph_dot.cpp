#include "framework/io/graph_dot.hpp"

#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <unordered_map>

#include "framework/core/autograd.hpp"

namespace headgrad {
namespace {

// The traced graph and what ties it to the tape: the tensors themselves (held, so that their
// addresses stay theirs until the backward that reads them has run) and each one's node.
struct Traced {
  Graph graph;
  std::vector<std::shared_ptr<TensorImpl>> tensors;
  std::unordered_map<const TensorImpl*, std::size_t> index;
};

// The names of the leaves by tensor: one lookup per node, whatever the number of parameters.
struct NameIndex {
  std::unordered_map<const TensorImpl*, const std::string*> parameters, inputs, results;
  explicit NameIndex(const LeafNames& names) {
    for (const auto& [name, tensor] : names.parameters) parameters.emplace(tensor.impl(), &name);
    for (const auto& [name, tensor] : names.inputs) inputs.emplace(tensor.impl(), &name);
    for (const auto& [name, tensor] : names.results) results.emplace(tensor.impl(), &name);
  }
};

const std::string* name_in(const std::unordered_map<const TensorImpl*, const std::string*>& names,
                           const TensorImpl* t) {
  const auto it = names.find(t);
  return it == names.end() ? nullptr : it->second;
}

// The values of a tensor small enough to show them, else none.
std::vector<double> small_values(const Tensor& t) {
  return t.defined() && t.numel() <= kGraphValuesMax ? t.to_vector() : std::vector<double>{};
}

GraphNode node_of(const std::shared_ptr<TensorImpl>& impl, const NameIndex& names, const Traced& traced) {
  const TensorImpl& t = *impl;
  GraphNode n;
  n.shape = t.shape;
  n.data = small_values(Tensor(impl));
  if (t.grad_fn) {
    n.op = t.grad_fn->name;
    if (const std::string* r = name_in(names.results, &t)) n.name = *r;
    for (const auto& in : t.grad_fn->inputs) {
      auto it = in ? traced.index.find(in.get()) : traced.index.end();
      if (it != traced.index.end()) n.inputs.push_back(it->second); // an input the tape follows
    }
  } else if (const std::string* p = name_in(names.parameters, &t)) {
    n.kind = GraphNodeKind::parameter;
    n.name = *p;
  } else {
    n.kind = GraphNodeKind::input;
    if (const std::string* i = name_in(names.inputs, &t)) n.name = *i;
  }
  return n;
}

Traced trace(const Tensor& root, const LeafNames& names) {
  if (!root.defined() || !root.requires_grad())
    throw std::logic_error("trace_graph: the tensor has no graph (it does not require grad)");
  if (root.impl()->grad_fn && root.impl()->grad_fn->released)
    throw std::logic_error("trace_graph: the graph was freed by backward(); trace it before, or pass retain_graph=true");
  Traced t;
  const NameIndex index(names);
  t.tensors = topological_order(root); // inputs before the nodes that read them
  for (std::size_t i = 0; i < t.tensors.size(); ++i) {
    t.graph.nodes.push_back(node_of(t.tensors[i], index, t));
    t.index.emplace(t.tensors[i].get(), i);
  }
  return t;
}

double frobenius_norm(const Tensor& g) {
  double s = 0;
  for (double v : g.to_vector()) s += v * v;
  return std::sqrt(s);
}

std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// "[0.1234, -0.5]": a small tensor's values, 4 significant digits, a rounded zero unsigned.
std::string values_text(const std::vector<double>& v) {
  std::vector<std::string> parts;
  for (double x : v) {
    std::string s = fmt::format("{:.4g}", x);
    if (s == "-0") s = "0";
    parts.push_back(s);
  }
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// Lines joined by DOT's "\n"; the text itself is escaped. An op output with a name shows the
// name first and the op under it ("scores S", "matmul [2, 3, 4]").
std::string node_label(const GraphNode& n) {
  std::string label;
  if (n.kind != GraphNodeKind::op) label = dot_escape(n.name.empty() ? "input" : n.name) + "\\n";
  else if (n.name.empty()) label = dot_escape(n.op) + "\\n";
  else label = dot_escape(n.name) + "\\n" + dot_escape(n.op) + " "; // "scores S ...", "matmul [2, 3, 4]"
  label += n.shape.str();
  if (n.grad_norm) label += fmt::format("\\ngrad norm {:.3g}", *n.grad_norm);
  if (!n.data.empty()) label += "\\ndata " + values_text(n.data);
  if (!n.grad.empty()) label += "\\ngrad " + values_text(n.grad);
  return label;
}

std::string node_style(const GraphNode& n, bool root) {
  std::string style;
  switch (n.kind) {
  case GraphNodeKind::op: style = "shape=ellipse"; break;
  case GraphNodeKind::parameter: style = "shape=box, style=filled, fillcolor=\"#cfe2f3\""; break;
  case GraphNodeKind::input: style = "shape=box, style=filled, fillcolor=\"#d9ead3\""; break;
  }
  if (root) style += ", peripheries=2";
  return style;
}

} // namespace

std::size_t Graph::edge_count() const {
  std::size_t n = 0;
  for (const auto& node : nodes) n += node.inputs.size();
  return n;
}

Graph trace_graph(const Tensor& root, const LeafNames& names) { return trace(root, names).graph; }

Graph backward_with_graph(const Tensor& root, const Tensor& grad_output, const LeafNames& names) {
  Traced t = trace(root, names);
  {
    ObserveGradients watch([&t](const TensorImpl& tensor, const Tensor& grad) {
      auto it = t.index.find(&tensor);
      if (it == t.index.end() || !grad.defined()) return;
      t.graph.nodes[it->second].grad_norm = frobenius_norm(grad);
      t.graph.nodes[it->second].grad = small_values(grad);
    });
    root.backward(grad_output);
  }
  return std::move(t.graph);
}

Graph backward_with_graph(const Tensor& root, const LeafNames& names) {
  if (!root.defined() || root.numel() != 1)
    throw std::logic_error("backward_with_graph: without a gradient the root must have one element");
  return backward_with_graph(root, Tensor::ones(root.shape(), root.dtype()), names);
}

std::string graph_dot(const Graph& graph, const std::string& title, std::size_t max_nodes) {
  const std::size_t n = graph.nodes.size();
  // The nodes drawn: all, or the max_nodes nearest the root (breadth first from it along the inputs).
  std::vector<char> drawn(n, n <= max_nodes);
  std::size_t shown = n;
  if (n > max_nodes) {
    std::vector<std::size_t> queue = {n - 1};
    drawn[n - 1] = 1;
    for (std::size_t q = 0; q < queue.size() && queue.size() < max_nodes; ++q)
      for (std::size_t in : graph.nodes[queue[q]].inputs)
        if (!drawn[in] && queue.size() < max_nodes) {
          drawn[in] = 1;
          queue.push_back(in);
        }
    shown = queue.size();
  }
  std::string cut_note;
  if (shown < n)
    cut_note = fmt::format("\\nthe {} nodes nearest the root of {} are drawn (the first ones backward reaches); the "
                           "grey box stands for the other {}",
                           shown, n, n - shown);
  std::string s = "digraph autograd {\n";
  s += fmt::format("  graph [fontname=\"sans-serif\", labelloc=t, label=\"{}\\nellipses: op outputs; blue boxes: "
                   "parameters; green boxes: inputs; double border: the root. Arrows run as the forward did; "
                   "backward walks them in reverse. A tensor of at most {} elements shows its data and grad.{}\"];\n",
                   dot_escape(title), kGraphValuesMax, cut_note);
  s += "  node [fontname=\"sans-serif\", fontsize=10];\n";
  if (shown < n)
    s += fmt::format("  cut [label=\"{} more nodes\\n(not drawn)\", shape=box, style=\"filled,dashed\", "
                     "fillcolor=\"#eeeeee\"];\n",
                     n - shown);
  for (std::size_t i = 0; i < n; ++i)
    if (drawn[i])
      s += fmt::format("  n{} [label=\"{}\", {}];\n", i, node_label(graph.nodes[i]),
                       node_style(graph.nodes[i], i + 1 == n));
  for (std::size_t i = 0; i < n; ++i) {
    if (!drawn[i]) continue;
    bool from_cut = false; // one edge from the box, however many of this node's inputs it holds
    for (std::size_t in : graph.nodes[i].inputs) {
      if (drawn[in]) s += fmt::format("  n{} -> n{};\n", in, i);
      else if (!from_cut) s += fmt::format("  cut -> n{} [style=dashed];\n", i), from_cut = true;
    }
  }
  s += "}\n";
  return s;
}

} // namespace headgrad
