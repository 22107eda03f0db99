#include "framework/core/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "framework/core/autograd.hpp"
#include "framework/core/random.hpp"
#include "framework/core/strided.hpp"

namespace headgrad {

void Tensor::throw_undefined(const char* method) {
  throw std::logic_error(fmt::format("{}: the tensor is undefined (a default-constructed Tensor(), or the grad() of "
                                     "a tensor no backward has reached)", method));
}

void throw_undefined_input(const char* op, const char* what) {
  throw std::invalid_argument(fmt::format("{}: {} is an undefined tensor (Tensor(), or a grad() no backward has "
                                          "reached)", op, what));
}

Tensor new_tensor(const Dims& shape, DType dtype, const char* fn) {
  // Checked size arithmetic: a hostile shape must not overflow into a small allocation.
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 46; // 64 TiB: far beyond any real tensor here
  std::int64_t elements = 1;
  for (auto s : shape) {
    if (s < 0) throw std::invalid_argument(fmt::format("{}: negative size in shape {}", fn, shape));
    if (s != 0 && elements > kMaxBytes / s)
      throw std::invalid_argument(fmt::format("{}: shape {} is too large", fn, shape));
    elements *= s;
  }
  if (elements > kMaxBytes / static_cast<std::int64_t>(dtype_size(dtype)))
    throw std::invalid_argument(fmt::format("{}: shape {} of {} is too large", fn, shape, dtype_name(dtype)));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, const Dims& shape, const Dims& strides, std::int64_t offset) {
  check_defined(base, "make_view", "the base");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->offset = offset;
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Dims& shape, DType dtype) { return new_tensor(shape, dtype, "Tensor::empty"); }

Tensor Tensor::zeros(const Dims& shape, DType dtype) {
  Tensor t = new_tensor(shape, dtype, "Tensor::zeros");
  std::memset(t.raw(), 0, static_cast<std::size_t>(t.numel()) * dtype_size(dtype));
  return t;
}

Tensor Tensor::ones(const Dims& shape, DType dtype) {
  Tensor t = new_tensor(shape, dtype, "Tensor::ones");
  dispatch_any(dtype, [&]<typename T>() { std::fill_n(t.data<T>(), t.numel(), T(1)); });
  return t;
}

Tensor Tensor::full(const Dims& shape, double value, DType dtype) {
  Tensor t = new_tensor(shape, dtype, "Tensor::full");
  dispatch_any(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = book::convert_value<T>(value);
  });
  return t;
}

Tensor Tensor::arange(std::int64_t n, DType dtype) {
  Tensor t = new_tensor({n}, dtype, "Tensor::arange");
  dispatch_any(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  });
  return t;
}

Tensor Tensor::from(const std::vector<double>& values, const Dims& shape, DType dtype) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel())
    throw std::invalid_argument(fmt::format("Tensor::from: {} values do not fill shape {} ({} elements)",
                                            values.size(), shape, shape.numel()));
  Tensor t = new_tensor(shape, dtype, "Tensor::from");
  dispatch_any(dtype, [&]<typename T>() {
    T* p = t.data<T>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = book::convert_value<T>(values[i]);
  });
  return t;
}

Tensor Tensor::from_ints(const std::vector<std::int64_t>& values, const Dims& shape) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel())
    throw std::invalid_argument(fmt::format("Tensor::from_ints: {} values do not fill shape {} ({} elements)",
                                            values.size(), shape, shape.numel()));
  Tensor t = new_tensor(shape, DType::i64, "Tensor::from_ints");
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(std::int64_t));
  return t;
}

Tensor Tensor::uniform(const Dims& shape, double low, double high, Generator& gen, DType dtype) {
  Tensor t = new_tensor(shape, dtype, "Tensor::uniform");
  dispatch_float(dtype, "Tensor::uniform", [&]<typename T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(low + (high - low) * gen.uniform());
  });
  return t;
}

Tensor Tensor::normal(const Dims& shape, double mean, double std, Generator& gen, DType dtype) {
  Tensor t = new_tensor(shape, dtype, "Tensor::normal");
  dispatch_float(dtype, "Tensor::normal", [&]<typename T>() {
    T* p = t.data<T>();
    for (std::int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<T>(mean + std * gen.normal());
  });
  return t;
}

std::int64_t Tensor::size(int axis) const { return checked("Tensor::size").shape[wrap_axis(axis, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  checked("Tensor::is_contiguous");
  if (numel() == 0) return true; // no element to misplace (torch.Tensor.is_contiguous says so too)
  std::int64_t expect = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (impl_->shape[i] != 1 && impl_->strides[i] != expect) return false;
    expect *= impl_->shape[i];
  }
  return true;
}

std::vector<double> Tensor::to_vector() const {
  checked("Tensor::to_vector");
  std::vector<double> out(static_cast<std::size_t>(numel()));
  dispatch_any(dtype(), [&]<typename T>() {
    book::copy_strided(out.data(), data<T>(), shape(), strides());
  });
  return out;
}

std::vector<std::int64_t> Tensor::to_int_vector() const {
  checked("Tensor::to_int_vector");
  std::vector<std::int64_t> out(static_cast<std::size_t>(numel()));
  dispatch_any(dtype(), [&]<typename T>() {
    book::copy_strided(out.data(), data<T>(), shape(), strides());
  });
  return out;
}

double Tensor::item() const {
  checked("Tensor::item");
  if (numel() != 1)
    throw std::invalid_argument(fmt::format("item: expected a one-element tensor, got shape {}", shape()));
  return to_vector()[0];
}

Tensor& Tensor::set_requires_grad(bool on) {
  checked("Tensor::set_requires_grad");
  if (on && !is_float(dtype()))
    throw std::invalid_argument(fmt::format("set_requires_grad: only float tensors can require grad, got {}",
                                            dtype_name(dtype())));
  if (!is_leaf())
    throw std::logic_error("set_requires_grad: only leaf tensors can change requires_grad; use detach() first");
  impl_->requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  const TensorImpl& impl = checked("Tensor::grad");
  return impl.grad ? Tensor(impl.grad) : Tensor();
}
void Tensor::zero_grad() {
  checked("Tensor::zero_grad");
  impl_->grad.reset();
}

Tensor Tensor::detach() const {
  checked("Tensor::detach");
  return make_view(*this, shape(), strides(), impl_->offset);
}

void Tensor::backward(bool retain_graph) const {
  checked("Tensor::backward");
  if (numel() != 1)
    throw std::logic_error(fmt::format(
        "backward: called without a gradient on a tensor of shape {}; pass the upstream gradient "
        "(backward(grad)) or reduce to a scalar first", shape()));
  run_backward(*this, Tensor::ones(shape(), dtype()), retain_graph);
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  checked("Tensor::backward");
  check_defined(grad_output, "Tensor::backward", "grad_output");
  run_backward(*this, grad_output, retain_graph);
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::string out = fmt::format("Tensor(shape={}, dtype={}", shape(), dtype_name(dtype()));
  if (requires_grad()) out += ", requires_grad";
  out += ")\n";
  const auto v = to_vector();
  const std::int64_t limit = 1000; // long tensors print their first elements only
  if (dim() == 0) return out + fmt::format("{:.6g}", v.empty() ? 0.0 : v[0]);
  const std::int64_t cols = shape().back();
  const std::int64_t n = std::min<std::int64_t>(static_cast<std::int64_t>(v.size()), limit);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % std::max<std::int64_t>(cols, 1) == 0) out += i == 0 ? "[" : "]\n[";
    else out += ", ";
    out += fmt::format("{:.6g}", v[i]);
  }
  if (n > 0) out += "]";
  if (n < static_cast<std::int64_t>(v.size())) out += fmt::format("\n... ({} more)", v.size() - n);
  return out;
}

} // namespace headgrad
