// autograd.hpp - the dynamic tape: a Node per op output, its backward closure, and the engine
// that walks the graph in reverse topological order.
//
// Ownership (flashlight's idiom): an output tensor owns its Node; the Node owns its inputs; a
// Node never owns its own output, so there are no shared_ptr cycles. An op that needs its output
// in backward (softmax keeps y) captures the output's Storage-backed tensor *detached*.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "framework/core/tensor.hpp"

namespace headgrad {

struct Node;
// The backward closure: receives dy, the gradient of the node's output (contiguous, the output's
// shape), and adds each input's share of it to that input's gradient through the Node.
using BackwardFn = std::function<void(Node& node, const Tensor& dy)>;

// Input i's gradient buffer, for a backward that computes its contribution straight into it.
struct GradBuffer {
  Tensor tensor;            // contiguous, input i's shape and dtype; undefined: no gradient needed
  bool first_write = false; // true: fresh and uninitialised - write every element (`=`, gemm beta 0)
                            // false: holds earlier contributions - add to it (`+=`, gemm beta 1)
  explicit operator bool() const { return tensor.defined(); }
  template <typename T> T* data() const { return tensor.defined() ? tensor.data<T>() : nullptr; }
};

// The gradient contract. Gradients add up: an input used by several ops receives the sum of
// their contributions, and a leaf keeps adding over backward() calls until zero_grad(). A
// backward adds its contribution to input i's gradient in one of two ways:
//   n.add_to_grad(i, g)  x_i.grad += g  (micrograd's `self.grad += ...`). g has x_i's shape, or
//                        the shape x_i was broadcast to, and is then summed over the broadcast axes.
//   n.grad_buffer(i)     the buffer itself and its `first_write` flag, for a backward that writes
//                        its contribution directly (a gemm, a fused kernel). Kernels take the flag
//                        as their `first_write` argument: on the first write they assign instead of
//                        adding (no zero fill, no read of zeros: store_grad per element,
//                        first_write_beta for a gemm, below); one that cannot cover every element
//                        zero-fills first.
// When two inputs are one tensor (x * x), the second call finds the first's buffer
// (first_write = false): write the gradients in the order you asked for them.
struct Node {
  const char* name;                                  // op name, for errors and the profiler
  std::vector<std::shared_ptr<TensorImpl>> inputs;   // what the op read (null: not a tensor)
  BackwardFn backward;
  bool released = false;                             // set when backward freed the graph

  Tensor input(std::size_t i) const { return Tensor(inputs[i]); }
  bool needs_grad(std::size_t i) const { return inputs[i] && inputs[i]->requires_grad; }

  void add_to_grad(std::size_t i, const Tensor& g, double scale = 1.0);
  void add_to_grad(std::size_t i, Tensor&& g, double scale = 1.0); // g, a temporary, may be kept
  GradBuffer grad_buffer(std::size_t i);
  // A buffer of dy's shape for an intermediate computed from dy element by element (a fused
  // activation's dz = dy * f'(z)), written in full by the caller: dy's own buffer when nothing
  // else refers to it (the engine drops dy once this node has run, as for the hand-off of
  // add_to_grad; dy may then no longer be handed on), else a fresh one. Saves the allocation and
  // the first touch of a buffer while dy is still in cache.
  Tensor overwritable_dy(const Tensor& dy);

private:
  // Skip on first reading: the first gradient an input receives may be g's own buffer instead of a
  // copy of it, when nothing else can write to that buffer any more - a temporary handed over as
  // an rvalue (n.add_to_grad(0, dy * b)) that nothing else refers to, or dy itself or a view of it
  // (the engine drops dy once this node has run; it can go to one input only, and the engine,
  // not the Node, keeps track of that: autograd.cpp).
  void add_gradient(std::size_t i, const Tensor& g, double scale, bool temporary);
};

// The contract per element: dst = v on the first write, dst += v after it.
template <typename T> inline void store_grad(T& dst, T v, bool first_write) { dst = first_write ? v : dst + v; }
// And as the beta of a gemm writing C: 0 on the first write (C is not read, NaN included), 1 after it.
template <typename T> constexpr T first_write_beta(bool first_write) { return first_write ? T(0) : T(1); }

// True while gradients are being recorded (the default). NoGradGuard turns it off in a scope;
// the engine runs every backward closure under one, so ops used in a backward record nothing.
bool grad_enabled();
class NoGradGuard {
public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
private:
  bool prev_;
};

// Attaches a node to `out` if grad mode is on and any input requires grad. Returns `out`.
Tensor record(Tensor out, const char* name, std::vector<Tensor> inputs, BackwardFn backward);
// Whether record() with these inputs would attach a node: an op asks before computing what only
// its backward reads (GELU's derivative), so that inference does not pay for it.
bool will_record(std::initializer_list<const Tensor*> inputs);

// Every tensor `root` depends on that requires grad (root included), each after all the tensors
// its op read: the order backward walks in reverse. Throws std::logic_error if part of the graph
// was freed by an earlier backward.
std::vector<std::shared_ptr<TensorImpl>> topological_order(const Tensor& root);

// The engine. `root` must require grad; `grad_output` has root's shape.
void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph);

// Skip on first reading: watching a backward from outside. A tool that draws the graph wants each
// gradient: run_backward drops a non-leaf's as soon as its node has used it, so that is the only
// moment it can be seen (framework/io/graph_dot.hpp). Data-parallel training wants each node done:
// once the last node that writes into a parameter has run, its gradient is final and can be sent
// while backward goes on (framework/distributed/grad_ready_hooks.hpp). Every backward asks each
// installed watcher, on its own thread, for a watch of its walk (`order`: topological_order(root),
// walked in reverse; null: nothing to watch); a watch must not change a gradient, and an exception
// it throws ends the backward.
struct BackwardWatch {
  virtual ~BackwardWatch() = default;
  // each tensor as the walk reaches it (the root first, just seeded), its gradient complete
  // (undefined: nothing reached it)
  virtual void gradient(const TensorImpl& /*tensor*/, const Tensor& /*grad*/) {}
  // each node once it has run (or had nothing to do): it wrote its inputs' gradients
  virtual void node_done(const Node& /*node*/) {}
};
using BackwardWatcher =
    std::function<std::unique_ptr<BackwardWatch>(const std::vector<std::shared_ptr<TensorImpl>>& order)>;
// Installs `watcher` for the backward calls of every thread while this object lives.
class WatchBackwards {
public:
  explicit WatchBackwards(BackwardWatcher watcher);
  ~WatchBackwards();
  WatchBackwards(const WatchBackwards&) = delete;
  WatchBackwards& operator=(const WatchBackwards&) = delete;
private:
  BackwardWatcher watcher_;
};
// While alive, shows `observer` each gradient of this thread's backward calls (BackwardWatch::gradient).
using GradientObserver = std::function<void(const TensorImpl& tensor, const Tensor& grad)>;
class ObserveGradients : WatchBackwards {
public:
  explicit ObserveGradients(GradientObserver observer);
};

} // namespace headgrad
