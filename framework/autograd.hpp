// autograd.hpp - the dynamic tape: a Node per op output, its backward closure, and the engine
// that walks the graph in reverse topological order.
//
// Ownership (flashlight's idiom): an output tensor owns its Node; the Node owns its inputs; a
// Node never owns its own output, so there are no shared_ptr cycles. An op that needs its output
// in backward (softmax keeps y) captures the output's Storage-backed tensor *detached*.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "framework/tensor.hpp"

namespace headgrad {

struct Node;
// The backward closure: receives the gradient of the node's output (contiguous, output's shape)
// and accumulates (+=) into the gradients of its inputs via node.grad(i) (or writes the first
// contribution with `=` via grad_for_write, or hands its buffer on via adopt_grad).
using BackwardFn = std::function<void(Node& node, const Tensor& grad_output)>;

struct Node {
  const char* name;                                  // op name, for errors and the profiler
  std::vector<std::shared_ptr<TensorImpl>> inputs;   // what the op read (null: not a tensor)
  BackwardFn backward;
  bool released = false;                             // set when backward freed the graph

  Tensor input(std::size_t i) const { return Tensor(inputs[i]); }
  bool needs_grad(std::size_t i) const { return inputs[i] && inputs[i]->requires_grad; }
  // The gradient buffer of input i to accumulate into: contiguous, input's shape and dtype,
  // zero-filled on first use. Undefined tensor when input i needs no gradient.
  Tensor grad(std::size_t i) const;
  // For a backward that writes every element of input i's gradient: if input i has no gradient
  // buffer yet, a new *uninitialised* one and assign = true - the caller must write every element
  // with `=`; otherwise the existing buffer and assign = false - the caller accumulates (`+=`).
  // Saves the zero fill and the read of zeros. Undefined tensor when input i needs no gradient.
  Tensor grad_for_write(std::size_t i, bool& assign) const;
  // Hands `g` to input i as its gradient without copying, if input i has no gradient buffer yet;
  // returns false (nothing done) otherwise. g must be contiguous with input i's shape and dtype
  // and nothing else may write to its storage afterwards (the output gradient a backward
  // receives qualifies: the engine drops it once this node has run).
  bool adopt_grad(std::size_t i, const Tensor& g) const;
};

// True while gradients are being recorded (the default). NoGradGuard turns it off in a scope.
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

// True when an op over these inputs must record a node.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

// Attaches a node to `out` if grad mode is on and any input requires grad. Returns `out`.
Tensor record(Tensor out, const char* name, std::vector<Tensor> inputs, BackwardFn backward);

// The engine. `root` must require grad; `grad_output` has root's shape.
void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph);

// Optional per-op timing (headgrad train --profile). The profiler is off unless enabled.
struct OpProfile {
  const char* name;
  std::int64_t forward_calls, backward_calls;
  double forward_seconds, backward_seconds;
};
void profiler_enable(bool on);
bool profiler_enabled();
void profiler_reset();
std::vector<OpProfile> profiler_report();
void profiler_add(const char* name, bool backward, double seconds);

// Times the enclosing forward kernel when the profiler is on.
class ForwardTimer {
public:
  explicit ForwardTimer(const char* name);
  ~ForwardTimer();
private:
  const char* name_;
  double start_;
};

} // namespace headgrad
