// graph_dot.hpp - the autograd graph behind a tensor, as data and as Graphviz DOT text, the way
// micrograd's draw_dot shows it (https://github.com/karpathy/micrograd, trace_graph.ipynb): one
// node per op output with the op's name and the output's shape (and, when the caller names it,
// what it holds: "scores S"), one per leaf (parameters by name, inputs), an edge from every
// tensor an op read to the op's output, and, once backward has run, the norm of each node's
// gradient. A tensor of at most kGraphValuesMax elements shows its values and its gradient too,
// as micrograd's nodes show data and grad.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad {

enum class GraphNodeKind { op, parameter, input };

// Tensors of at most this many elements carry their values (and gradients) in the graph.
constexpr std::int64_t kGraphValuesMax = 8;

struct GraphNode {
  GraphNodeKind kind = GraphNodeKind::op;
  std::string op;                  // the op that made the tensor ("linear"); empty for a leaf
  std::string name;                // a leaf's name ("W_q.weight", "queries"), or what an op's
                                   // output holds ("scores S"); empty if not given
  Dims shape;
  std::vector<std::size_t> inputs; // the nodes the op read: one per input slot that needs grad
  std::optional<double> grad_norm; // ||dL/d tensor|| (Frobenius) as backward completed it
  std::vector<double> data, grad;  // values and gradient, for at most kGraphValuesMax elements
};

// The names given to tensors: leaves (parameters, e.g. a module's named_parameters(), and inputs)
// and, optionally, op outputs by what they hold.
struct LeafNames {
  NamedTensors parameters;
  NamedTensors inputs;
  NamedTensors results = {};
};

struct Graph {
  std::vector<GraphNode> nodes; // every node after the nodes it read; the root last
  std::size_t edge_count() const;
};

// The graph behind `root` as the tape holds it now: every tensor root depends on that requires
// grad. A leaf not in `names` is an input without a name. Throws std::logic_error if root does
// not require grad or part of the graph was freed by an earlier backward.
Graph trace_graph(const Tensor& root, const LeafNames& names);

// trace_graph, then root.backward(grad_output), recording each node's gradient norm at the
// moment backward completes it (a non-leaf's gradient is dropped right after). A leaf's norm is
// of its whole .grad, so zero the leaves' gradients first to see one backward's alone.
Graph backward_with_graph(const Tensor& root, const Tensor& grad_output, const LeafNames& names);
Graph backward_with_graph(const Tensor& root, const LeafNames& names); // seed 1: a one-element root

// The most nodes graph_dot draws. A larger graph (a many-layer model's training step) is drawn
// as the kMaxDrawnNodes nodes nearest the root, the first ones backward reaches (breadth first
// along the inputs), with one box standing for all the others and an edge from it to every drawn
// node that read one of them; the title says how many nodes of how many are drawn. The DOT text,
// and the time Graphviz takes to lay it out, are then bounded whatever the model's size.
inline constexpr std::size_t kMaxDrawnNodes = 400;

// Graphviz DOT: ops as ellipses, parameters and inputs as filled boxes, the root with a double
// border; edges point the way the forward ran (backward walks them the other way). A label is
// the name (if any), the op and shape, the gradient norm, then data and grad for small tensors.
// At most max_nodes nodes of the graph are drawn (above).
std::string graph_dot(const Graph& graph, const std::string& title, std::size_t max_nodes = kMaxDrawnNodes);

} // namespace headgrad
