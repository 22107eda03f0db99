// autograd.cpp - recording ops on the tape, and the backward walk.
//
// Read run_backward first: a topological order from the root, then every node's backward in
// reverse, each adding its inputs' gradients. Skip on first reading: the watchers and the
// watches' lines in run_backward (marked), which show the walk to a tool that draws the graph and
// to data-parallel training; and the second half of the file (marked), the memory and
// first-write machinery behind Node::add_to_grad and Node::grad_buffer.
#include "framework/core/autograd.hpp"

#include <fmt/format.h>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_set>

#include "framework/core/broadcast.hpp"
#include "framework/core/strided.hpp"
#include "framework/engine/kernels.hpp"

namespace headgrad {

namespace {
thread_local bool g_grad_enabled = true;
// Skip on first reading: the dy of the backward call running on this thread, which
// Node::add_to_grad may hand on to one input as its gradient instead of copying it (see there).
struct DyState {
  const Storage* storage = nullptr;
  bool handed_on = false;
};
thread_local DyState t_dy;
// Sets t_dy for one backward call, and clears it after (also when the call throws).
struct DyHandOff {
  explicit DyHandOff(const Tensor& dy) { t_dy = {dy.impl()->storage.get(), false}; }
  ~DyHandOff() { t_dy = {}; }
  DyHandOff(const DyHandOff&) = delete;
  DyHandOff& operator=(const DyHandOff&) = delete;
};
void delete_node(Node* node);
GradBuffer gradient_of(TensorImpl* impl);
} // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

bool will_record(std::initializer_list<const Tensor*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
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

namespace {

void check_backward_call(const Tensor& root, const Tensor& grad_output) {
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
}

} // namespace

// A post-order depth-first walk (an explicit stack: recursion would overflow on long chains). The
// pointers own their tensors, so freeing the graph during the walk cannot free a node not yet run.
std::vector<std::shared_ptr<TensorImpl>> topological_order(const Tensor& root) {
  std::vector<std::shared_ptr<TensorImpl>> order;
  std::unordered_set<TensorImpl*> seen{root.impl()};
  std::vector<std::pair<std::shared_ptr<TensorImpl>, std::size_t>> stack{{root.impl_ptr(), 0}};
  while (!stack.empty()) {
    Node* node = stack.back().first->grad_fn.get();
    std::size_t& next = stack.back().second;
    if (node && next < node->inputs.size()) {
      std::shared_ptr<TensorImpl> child = node->inputs[next++];
      if (child && child->requires_grad && seen.insert(child.get()).second) {
        if (child->grad_fn && child->grad_fn->released)
          throw std::logic_error(
              "backward: part of the graph was already freed by a previous backward(); pass "
              "retain_graph=true to the first backward() to run backward twice");
        stack.emplace_back(std::move(child), 0);
      }
      continue;
    }
    order.push_back(std::move(stack.back().first));
    stack.pop_back();
  }
  return order;
}

// Skip on first reading: the installed watchers, which every backward asks for a watch of its walk.
namespace {
std::shared_mutex g_watchers_mutex;
std::vector<const BackwardWatcher*> g_watchers;
struct GradientLook final : BackwardWatch { // ObserveGradients' watch
  explicit GradientLook(const GradientObserver& f) : observer(f) {}
  void gradient(const TensorImpl& tensor, const Tensor& grad) override { observer(tensor, grad); }
  const GradientObserver& observer;
};
std::vector<std::unique_ptr<BackwardWatch>> watches_of(const std::vector<std::shared_ptr<TensorImpl>>& order) {
  std::vector<std::unique_ptr<BackwardWatch>> watches;
  std::shared_lock lock(g_watchers_mutex);
  for (const BackwardWatcher* w : g_watchers)
    if (auto watch = (*w)(order)) watches.push_back(std::move(watch));
  return watches;
}
} // namespace

WatchBackwards::WatchBackwards(BackwardWatcher watcher) : watcher_(std::move(watcher)) {
  std::unique_lock lock(g_watchers_mutex);
  g_watchers.push_back(&watcher_);
}
WatchBackwards::~WatchBackwards() {
  std::unique_lock lock(g_watchers_mutex);
  std::erase(g_watchers, &watcher_);
}

ObserveGradients::ObserveGradients(GradientObserver observer)
    : WatchBackwards([f = std::move(observer), thread = std::this_thread::get_id()](const auto&) {
        return std::unique_ptr<BackwardWatch>(std::this_thread::get_id() == thread ? new GradientLook(f) : nullptr);
      }) {}

void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  check_backward_call(root, grad_output);
  const std::vector<std::shared_ptr<TensorImpl>> order = topological_order(root);
  const auto watches = watches_of(order); // skip on first reading: the watches and their calls below

  // Seed: the root's gradient receives grad_output (added, as a leaf's would be).
  {
    const GradBuffer seed = gradient_of(root.impl());
    dispatch_float(root.dtype(), "backward", [&]<typename T>() {
      book::sum_into<T>(seed.data<T>(), seed.first_write, root.shape(), grad_output.data<T>(), grad_output.shape(),
                           grad_output.strides(), T(1));
    });
  }

  // Reverse post-order: every consumer of a tensor has run before the tensor's own node, so its
  // gradient is complete when its node reads it.
  NoGradGuard no_grad; // a backward built from ops records nothing
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    TensorImpl* impl = it->get();
    const Tensor dy(impl->grad); // complete: every consumer has run
    for (const auto& w : watches) w->gradient(*impl, dy);
    Node* node = impl->grad_fn.get();
    if (!node) continue; // a leaf: its gradient stays
    // A node none of whose inputs needs grad any more (a leaf had set_requires_grad(false) after
    // the op was recorded) has nowhere to write.
    bool any_input = false;
    for (std::size_t i = 0; i < node->inputs.size(); ++i) any_input = any_input || node->needs_grad(i);
    if (dy.defined() && any_input) {
      OpTimer timer(node->name, /*backward=*/true);
      const DyHandOff hand_off(dy);
      node->backward(*node, dy);
    }
    for (const auto& w : watches) w->node_done(*node);
    impl->grad.reset(); // non-leaf gradients are not kept (like PyTorch without retain_grad)
    if (!retain_graph) {
      node->backward = nullptr; // drops saved tensors
      node->inputs.clear();
      node->released = true;
    }
  }
}

// ================================================================================================
// Skip on first reading: gradient buffers, first writes, handing a buffer on, freeing long graphs.
// ================================================================================================

namespace {

// impl's gradient buffer: the existing one (first_write = false), or a fresh uninitialised one
// installed now (first_write = true).
GradBuffer gradient_of(TensorImpl* impl) {
  if (impl->grad) return {Tensor(impl->grad), false};
  Tensor g = new_tensor(impl->shape, impl->dtype);
  impl->grad = g.impl_ptr();
  return {g, true};
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

} // namespace

GradBuffer Node::grad_buffer(std::size_t i) {
  if (!needs_grad(i)) return {};
  return gradient_of(inputs[i].get());
}

Tensor Node::overwritable_dy(const Tensor& dy) {
  // dy of this call, not handed on, contiguous, and its storage held by its TensorImpl alone,
  // which only the engine holds (the tensor's gradient and the engine's copy of it)
  const bool own = dy.impl()->storage.get() == t_dy.storage && !t_dy.handed_on && dy.is_contiguous() &&
                   dy.impl()->storage.use_count() == 1 && dy.impl_ptr().use_count() <= 2;
  if (!own) return new_tensor(dy.shape(), dy.dtype());
  t_dy.handed_on = true; // it is about to hold something else than dy
  return dy;
}

void Node::add_to_grad(std::size_t i, const Tensor& g, double scale) { add_gradient(i, g, scale, false); }
void Node::add_to_grad(std::size_t i, Tensor&& g, double scale) { add_gradient(i, g, scale, true); }

void Node::add_gradient(std::size_t i, const Tensor& g, double scale, bool temporary) {
  if (!needs_grad(i)) return;
  TensorImpl* x = inputs[i].get();
  if (g.dtype() != x->dtype || !(broadcast_shapes(x->shape, g.shape(), name) == g.shape()))
    throw std::logic_error(fmt::format("{} backward: a gradient {} {} cannot be added to input {} {} {}", name,
                                       g.shape(), dtype_name(g.dtype()), i, x->shape, dtype_name(x->dtype)));
  // Hand g's buffer on instead of copying it, if this is x's first gradient and nothing else can
  // write to g's storage: dy (once per backward call), or a temporary only g refers to.
  const bool is_dy = g.impl()->storage.get() == t_dy.storage && !t_dy.handed_on;
  const bool sole_owner = temporary && g.impl_ptr().use_count() == 1 && g.impl()->storage.use_count() == 1;
  if (!x->grad && scale == 1.0 && g.shape() == x->shape && g.is_contiguous() && (is_dy || sole_owner)) {
    x->grad = make_view(g, x->shape, contiguous_strides(x->shape), g.impl()->offset).impl_ptr();
    if (is_dy) t_dy.handed_on = true;
    return;
  }
  const GradBuffer buf = gradient_of(x);
  dispatch_float(g.dtype(), name, [&]<typename T>() {
    book::sum_into<T>(buf.data<T>(), buf.first_write, x->shape, g.data<T>(), g.shape(), g.strides(),
                         static_cast<T>(scale));
  });
}

} // namespace headgrad
