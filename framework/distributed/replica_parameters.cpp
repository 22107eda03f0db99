#include "framework/distributed/replica_parameters.hpp"

#include <fmt/format.h>
#include <stdexcept>

#include "framework/core/strided.hpp"

namespace headgrad::distributed {

void check_same_parameters(const NamedTensors& a, const NamedTensors& b, const std::string& what) {
  bool same = a.size() == b.size();
  for (std::size_t i = 0; same && i < a.size(); ++i)
    same = a[i].first == b[i].first && a[i].second.shape() == b[i].second.shape() &&
           a[i].second.dtype() == b[i].second.dtype();
  if (!same)
    throw std::invalid_argument(
        fmt::format("{} ({} and {} parameters, or names, shapes or dtypes)", what, a.size(), b.size()));
}

void share_parameters(const NamedTensors& replica, const NamedTensors& source) {
  check_same_parameters(replica, source, "share_parameters: the modules differ");
  for (std::size_t i = 0; i < replica.size(); ++i) {
    TensorImpl* p = replica[i].second.impl();
    const TensorImpl* s = source[i].second.impl();
    p->storage = s->storage;
    p->offset = s->offset;
    p->strides = s->strides;
    p->grad.reset();
  }
}

void take_gradients_from(const NamedTensors& into, const NamedTensors& from) {
  check_same_parameters(into, from, "take_gradients_from: the modules differ");
  for (std::size_t i = 0; i < into.size(); ++i) {
    TensorImpl* p = into[i].second.impl();
    TensorImpl* o = from[i].second.impl();
    if (!o->grad) continue;
    if (!p->grad) {
      p->grad = std::move(o->grad);
      continue;
    }
    const Tensor g(p->grad), add(o->grad);
    dispatch_float(g.dtype(), "take_gradients_from", [&]<typename T>() {
      book::sum_into<T>(g.data<T>(), false, g.shape(), add.data<T>(), add.shape(), add.strides(), T(1));
    });
    o->grad.reset();
  }
}

} // namespace headgrad::distributed
