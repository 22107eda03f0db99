#include "framework/autograd.hpp"

#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <string>
#include <unordered_set>

namespace headgrad {

namespace {
thread_local bool g_grad_enabled = true;
bool g_profiler = false;
std::map<std::string, OpProfile> g_profile;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Deleter of every Node: tears a chain down with an explicit stack. The default destructor
// recurses (Node -> input TensorImpl -> its Node -> ...), one level per op, and overflows the
// stack on a long graph that backward() did not free (retain_graph, or never backwarded).
void delete_node(Node* node) {
  std::vector<std::shared_ptr<TensorImpl>> pending = std::move(node->inputs);
  delete node; // its closure may hold tensors, but their producers' inputs are in `pending` or shared
  while (!pending.empty()) {
    std::shared_ptr<TensorImpl> t = std::move(pending.back());
    pending.pop_back();
    // Last owner of t and of t's node: move the node's inputs here before t dies, so that its
    // destruction goes one level deep only.
    if (t && t.use_count() == 1 && t->grad_fn && t->grad_fn.use_count() == 1) {
      Node* n = t->grad_fn.get();
      for (auto& in : n->inputs) pending.push_back(std::move(in));
      n->inputs.clear();
      n->backward = nullptr;
    }
  }
}

// The gradient buffer of impl: allocated zero-filled on first use.
Tensor grad_buffer(TensorImpl* impl) {
  if (!impl->grad) {
    Tensor g = Tensor::zeros(impl->shape, impl->dtype);
    impl->grad = g.impl_ptr();
  }
  return Tensor(impl->grad);
}
} // namespace

Tensor Node::grad(std::size_t i) const {
  if (!needs_grad(i)) return Tensor();
  return grad_buffer(inputs[i].get());
}

Tensor Node::grad_for_write(std::size_t i, bool& assign) const {
  assign = false;
  if (!needs_grad(i)) return Tensor();
  TensorImpl* impl = inputs[i].get();
  if (impl->grad) return Tensor(impl->grad);
  Tensor g = Tensor::empty(impl->shape, impl->dtype);
  impl->grad = g.impl_ptr();
  assign = true;
  return g;
}

bool Node::adopt_grad(std::size_t i, const Tensor& g) const {
  if (!needs_grad(i)) return true; // nothing to receive it: done
  TensorImpl* impl = inputs[i].get();
  if (impl->grad) return false;
  if (!(g.shape() == impl->shape) || g.dtype() != impl->dtype || !g.is_contiguous())
    throw std::logic_error(fmt::format("adopt_grad: gradient {} {} does not fit input {} {} of {}", g.shape(),
                                       dtype_name(g.dtype()), impl->shape, dtype_name(impl->dtype), name));
  impl->grad = g.impl_ptr();
  return true;
}

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

Tensor record(Tensor out, const char* name, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!g_grad_enabled) return out;
  bool any = false;
  for (const auto& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return out;
  std::shared_ptr<Node> node(new Node(), delete_node);
  node->name = name;
  node->inputs.reserve(inputs.size());
  for (auto& t : inputs) node->inputs.push_back(t.defined() ? t.impl_ptr() : nullptr);
  node->backward = std::move(backward);
  out.impl()->grad_fn = std::move(node);
  out.impl()->requires_grad = true;
  return out;
}

void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  if (!root.defined()) throw std::logic_error("backward: called on an undefined tensor");
  if (!root.requires_grad())
    throw std::logic_error(
        "backward: this tensor does not require grad (no input had requires_grad set, or it was made "
        "under NoGradGuard); call set_requires_grad() on the leaves you want gradients for");
  if (root.impl()->grad_fn && root.impl()->grad_fn->released)
    throw std::logic_error(
        "backward: the graph behind this tensor was already freed by a previous backward(); pass "
        "retain_graph=true to the first backward() to run backward twice");
  if (!(grad_output.shape() == root.shape()))
    throw std::invalid_argument(fmt::format("backward: gradient shape {} does not match tensor shape {}",
                                            grad_output.shape(), root.shape()));
  if (grad_output.dtype() != root.dtype())
    throw std::invalid_argument(fmt::format("backward: gradient dtype {} does not match tensor dtype {}",
                                            dtype_name(grad_output.dtype()), dtype_name(root.dtype())));

  // Topological order by iterative DFS (post-order); recursion would overflow on long chains.
  // `order` holds owning pointers: freeing the graph as we go must not free a node not yet run.
  std::vector<std::shared_ptr<TensorImpl>> order;
  std::unordered_set<TensorImpl*> seen;
  std::vector<std::pair<std::shared_ptr<TensorImpl>, std::size_t>> stack;
  stack.emplace_back(root.impl_ptr(), 0);
  seen.insert(root.impl());
  while (!stack.empty()) {
    Node* node = stack.back().first->grad_fn.get();
    std::size_t& next = stack.back().second;
    if (node && next < node->inputs.size()) {
      std::shared_ptr<TensorImpl> child = node->inputs[next++];
      if (child && child->requires_grad && !seen.count(child.get())) {
        if (child->grad_fn && child->grad_fn->released)
          throw std::logic_error(
              "backward: part of the graph was already freed by a previous backward(); pass "
              "retain_graph=true to the first backward() to run backward twice");
        seen.insert(child.get());
        stack.emplace_back(std::move(child), 0);
      }
      continue;
    }
    order.push_back(std::move(stack.back().first));
    stack.pop_back();
  }

  // Seed: the root's gradient buffer receives grad_output (accumulating, as leaves do).
  {
    Tensor g = grad_buffer(root.impl());
    Tensor src = grad_output.contiguous();
    dispatch_float(g.dtype(), "backward", [&]<typename T>() {
      T* d = g.data<T>();
      const T* s = src.data<T>();
      for (std::int64_t i = 0, n = g.numel(); i < n; ++i) d[i] += s[i];
    });
  }

  // Reverse post-order: every consumer runs before the producer of its input.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* impl = it->get();
    Node* node = impl->grad_fn.get();
    if (!node) continue; // a leaf: its grad stays
    Tensor gy(impl->grad);
    // A node none of whose inputs needs grad any more (a leaf had set_requires_grad(false) after
    // the op was recorded) has nowhere to write: single-input backwards assume grad(0) exists.
    bool any_input = false;
    for (std::size_t i = 0; i < node->inputs.size(); ++i) any_input = any_input || node->needs_grad(i);
    if (gy.defined() && any_input) {
      const double t0 = g_profiler ? now_seconds() : 0.0;
      node->backward(*node, gy);
      if (g_profiler) profiler_add(node->name, true, now_seconds() - t0);
    }
    impl->grad.reset(); // non-leaf gradients are not kept (like PyTorch without retain_grad)
    if (!retain_graph) {
      node->backward = nullptr; // drops saved tensors
      node->inputs.clear();
      node->released = true;
    }
  }
}

void profiler_enable(bool on) { g_profiler = on; }
bool profiler_enabled() { return g_profiler; }
void profiler_reset() { g_profile.clear(); }
void profiler_add(const char* name, bool backward, double seconds) {
  auto& p = g_profile[name];
  p.name = name;
  if (backward) {
    ++p.backward_calls;
    p.backward_seconds += seconds;
  } else {
    ++p.forward_calls;
    p.forward_seconds += seconds;
  }
}
std::vector<OpProfile> profiler_report() {
  std::vector<OpProfile> out;
  for (auto& [k, v] : g_profile) out.push_back(v);
  return out;
}

ForwardTimer::ForwardTimer(const char* name) : name_(name), start_(g_profiler ? now_seconds() : 0.0) {}
ForwardTimer::~ForwardTimer() {
  if (g_profiler) profiler_add(name_, false, now_seconds() - start_);
}

} // namespace headgrad
