#include "framework/distributed/grad_ready_hooks.hpp"

#include <fmt/format.h>
#include <memory>
#include <mutex> // std::unique_lock
#include <shared_mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "framework/core/autograd.hpp"

namespace headgrad::distributed {
namespace {

// The hooks by leaf. The weak pointer tells the hooked leaf from a later tensor at its address.
struct Hooked {
  std::weak_ptr<TensorImpl> leaf;
  std::shared_ptr<const GradReadyHook> hook;
};
std::shared_mutex g_mutex;
std::unordered_map<const TensorImpl*, Hooked> g_hooks;

// The hooked leaves of one backward and, for each, how many nodes of the walk still write into it:
// when the count reaches zero the gradient is final and the hook runs.
class ReadyHooks final : public BackwardWatch {
public:
  // The watch of a walk: null when no leaf of it has a hook (the usual case: nothing to count).
  static std::unique_ptr<BackwardWatch> watch(const std::vector<std::shared_ptr<TensorImpl>>& order) {
    auto w = std::make_unique<ReadyHooks>();
    {
      std::shared_lock lock(g_mutex);
      for (const auto& t : order) {
        const auto it = t->grad_fn ? g_hooks.end() : g_hooks.find(t.get());
        if (it != g_hooks.end() && it->second.leaf.lock() == t) w->pending_[t.get()] = {0, it->second.hook};
      }
    }
    if (w->pending_.empty()) return nullptr;
    for (const auto& t : order)
      if (const Node* n = t->grad_fn.get()) w->for_each_hooked_input(*n, [](Pending& p) { ++p.writers; });
    return w;
  }
  // The walk's first tensor is the root, just seeded: a hooked leaf no node writes into (the root
  // itself) is final already.
  void gradient(const TensorImpl&, const Tensor&) override {
    if (seeded_) return;
    seeded_ = true;
    for (auto& [leaf, p] : pending_)
      if (p.writers == 0) (*p.hook)();
  }
  // After node n has run (or had nothing to do): its inputs have one writer less.
  void node_done(const Node& n) override {
    for_each_hooked_input(n, [](Pending& p) {
      if (--p.writers == 0) (*p.hook)();
    });
  }

private:
  struct Pending {
    int writers = 0;
    std::shared_ptr<const GradReadyHook> hook;
  };
  // f(pending) once per distinct hooked leaf among n's inputs (x * x writes into x once).
  template <typename F> void for_each_hooked_input(const Node& n, F f) {
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const TensorImpl* in = n.inputs[i].get();
      bool repeated = false;
      for (std::size_t j = 0; j < i && !repeated; ++j) repeated = n.inputs[j].get() == in;
      const auto it = repeated ? pending_.end() : pending_.find(in);
      if (it != pending_.end()) f(it->second);
    }
  }
  std::unordered_map<const TensorImpl*, Pending> pending_;
  bool seeded_ = false;
};

} // namespace

void set_grad_ready_hook(const Tensor& leaf, GradReadyHook hook) {
  if (!leaf.defined()) throw std::logic_error("set_grad_ready_hook: undefined tensor");
  if (!leaf.is_leaf())
    throw std::logic_error(fmt::format("set_grad_ready_hook: the tensor {} was produced by an op, not a leaf; its "
                                       "gradient is not kept",
                                       leaf.shape()));
  static const WatchBackwards watching(&ReadyHooks::watch); // every backward from the first hook on
  std::unique_lock lock(g_mutex);
  std::erase_if(g_hooks, [](const auto& entry) { return entry.second.leaf.expired(); }); // leaves gone
  if (hook) g_hooks[leaf.impl()] = {leaf.impl_ptr(), std::make_shared<const GradReadyHook>(std::move(hook))};
  else g_hooks.erase(leaf.impl());
}

} // namespace headgrad::distributed
