// tensor.hpp - the Tensor handle: shared storage + offset + shape + strides + dtype, and the
// autograd fields (requires_grad, grad, the node that produced it).
//
// A Tensor is a cheap shared handle (like torch.Tensor): copying it aliases the same data.
// Views (reshape of a contiguous tensor, permute, transpose, slice) share storage.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/dims.hpp"
#include "framework/core/dtype.hpp"
#include "framework/core/storage.hpp"

namespace headgrad {

class Generator;
struct Node;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  std::int64_t offset = 0; // in elements
  Dims shape;
  Dims strides; // in elements
  DType dtype = DType::f32;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // same shape, contiguous; accumulates
  std::shared_ptr<Node> grad_fn;     // null for leaves
};

class Tensor {
public:
  Tensor() = default; // undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories --------------------------------------------------------------------------
  static Tensor empty(const Dims& shape, DType dtype = DType::f32);
  static Tensor zeros(const Dims& shape, DType dtype = DType::f32);
  static Tensor ones(const Dims& shape, DType dtype = DType::f32);
  static Tensor full(const Dims& shape, double value, DType dtype = DType::f32);
  static Tensor arange(std::int64_t n, DType dtype = DType::f32);
  static Tensor from(const std::vector<double>& values, const Dims& shape, DType dtype = DType::f32);
  static Tensor from_ints(const std::vector<std::int64_t>& values, const Dims& shape);
  static Tensor scalar(double value, DType dtype = DType::f32) { return full({}, value, dtype); }
  // U(low, high) and N(mean, std) from a seeded generator: same seed, same values, any machine.
  static Tensor uniform(const Dims& shape, double low, double high, Generator& gen, DType dtype = DType::f32);
  static Tensor normal(const Dims& shape, double mean, double std, Generator& gen, DType dtype = DType::f32);

  // ---- metadata ----------------------------------------------------------------------------
  // Every accessor below, and every method, throws std::logic_error naming itself on an undefined
  // tensor (Tensor(), or grad() before a backward reached the tensor) instead of reading through a
  // null handle; ops check their inputs first (check_defined) to name the op instead.
  bool defined() const { return impl_ != nullptr; }
  const Dims& shape() const { return checked("Tensor::shape").shape; }
  const Dims& strides() const { return checked("Tensor::strides").strides; }
  std::int64_t size(int axis) const;
  int dim() const { return checked("Tensor::dim").shape.size(); }
  std::int64_t numel() const { return checked("Tensor::numel").shape.numel(); }
  DType dtype() const { return checked("Tensor::dtype").dtype; }
  bool is_contiguous() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- raw data (kernels) ------------------------------------------------------------------
  template <typename T> T* data() const {
    const TensorImpl& impl = checked("Tensor::data");
    return static_cast<T*>(impl.storage->data()) + impl.offset;
  }
  void* raw() const {
    const TensorImpl& impl = checked("Tensor::raw");
    return static_cast<char*>(impl.storage->data()) + impl.offset * dtype_size(impl.dtype);
  }

  // ---- read out ----------------------------------------------------------------------------
  std::vector<double> to_vector() const;          // any dtype, logical order
  std::vector<std::int64_t> to_int_vector() const; // i64/bool tensors
  double item() const;                            // one-element tensors

  // ---- conversions and views (autograd-aware: the ops of framework/ops/shape_ops.cpp) ------
  Tensor to(DType dtype) const;
  Tensor contiguous() const;
  Tensor reshape(const Dims& shape) const; // -1 allowed once; copies only if not contiguous
  Tensor view(const Dims& shape) const;    // like reshape, never copies: throws if no strides fit (ops::view)
  Tensor permute(const Dims& order) const;
  Tensor transpose(int a, int b) const;
  Tensor slice(int axis, std::int64_t start, std::int64_t stop) const; // [start, stop)
  Tensor clone() const;  // a contiguous copy that stays in the graph

  // ---- autograd ----------------------------------------------------------------------------
  bool requires_grad() const { return checked("Tensor::requires_grad").requires_grad; }
  Tensor& set_requires_grad(bool on = true);
  Tensor grad() const; // undefined until a backward reached this tensor
  void zero_grad();    // drops the accumulated gradient
  Tensor detach() const; // shares data, no history
  bool is_leaf() const { return checked("Tensor::is_leaf").grad_fn == nullptr; }
  // backward(): seed 1 for a one-element tensor; backward(g): explicit upstream gradient.
  void backward(bool retain_graph = false) const;
  void backward(const Tensor& grad_output, bool retain_graph = false) const;

  std::string str() const; // shape, dtype and values, for printing ("Tensor(undefined)" too)

private:
  const TensorImpl& checked(const char* method) const {
    if (!impl_) throw_undefined(method);
    return *impl_;
  }
  [[noreturn]] static void throw_undefined(const char* method);

  std::shared_ptr<TensorImpl> impl_;
};

// Throws std::invalid_argument "<op>: <what> is an undefined tensor" unless t is defined: the first
// line of an op, so that misuse names the op rather than a Tensor accessor.
[[noreturn]] void throw_undefined_input(const char* op, const char* what);
inline void check_defined(const Tensor& t, const char* op, const char* what = "the input") {
  if (!t.defined()) [[unlikely]]
    throw_undefined_input(op, what);
}

// Makes a tensor that aliases `base`'s storage with a new geometry (no autograd).
Tensor make_view(const Tensor& base, const Dims& shape, const Dims& strides, std::int64_t offset);
// A fresh, contiguous, uninitialised tensor with no history. A negative or overflowing shape throws
// std::invalid_argument naming `fn`.
Tensor new_tensor(const Dims& shape, DType dtype, const char* fn = "new_tensor");

// Tensors by name, in order: a module's parameters ("W_q.weight", ...) or a safetensors file's
// contents.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

} // namespace headgrad

// fmt support: fmt::format("{}", t) prints Tensor::str().
#include <fmt/format.h>
template <> struct fmt::formatter<headgrad::Tensor> : fmt::formatter<std::string> {
  auto format(const headgrad::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string>::format(t.str(), ctx);
  }
};
template <> struct fmt::formatter<headgrad::Dims> : fmt::formatter<std::string> {
  auto format(const headgrad::Dims& d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
